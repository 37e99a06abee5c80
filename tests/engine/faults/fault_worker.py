"""One rank of a fault job: ``threelcrun -np N /usr/bin/python3 fault_worker.py FAULT VICTIM``.

The VICTIM rank injects FAULT on itself; every other rank (a survivor) runs allreduces until
the engine fails them, and must then see a ThreelcError. Faults:

    prestart     the victim kills itself (SIGKILL) before it calls init(): the others wait
                 for it until THREELC_START_TIMEOUT
    startup      the victim kills itself inside init(): it starts 1.5 s late, so the others
                 wait in init() for it, and dies as soon as the first data channel reaches it
                 (its third socket, after its control connection and data listener)
    negotiation  the victim kills itself while the survivors wait for it to submit a tensor
    stall_negotiation  the victim stops itself (SIGSTOP) there: rank 0 waits for its cycle
                 request, the other survivors for rank 0's answer
    push_pull    the victim kills itself while large compressed allreduces are on the wire
    torch        as push_pull, through threelc.torch (hvd.allreduce of torch tensors, as a
                 Horovod training script calls it)
    stall        the victim stops itself (SIGSTOP) during those allreduces: its sockets stop
                 being read, its process stays alive
    link         nothing is injected here: each rank prints RUNNING after its first
                 allreduce, and the test then takes the victim's network link down (emulated
                 cluster, tools/eval/emulate_cluster)

Lines for the test (each prefixed by threelcrun with the rank):

    INJECT <fault> <monotonic time>        the victim, just before it injects the fault
    ERROR <code> <monotonic time> <message>  a survivor's exception: code name, when, message

(CLOCK_MONOTONIC is one clock for every process of the machine, network namespaces included,
so the test takes the time to error as the difference.)

Then the survivor re-raises the exception (a traceback, exit status 1), as an unhandled error
in a training script would. A survivor that finishes its allreduces without an error prints
NOERROR and exits 2: the fault went unnoticed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np

import threelc
import threelc.numpy as hvd
from threelc import engine
from threelc.engine import ThreelcError

FAULT = sys.argv[1]
VICTIM = int(sys.argv[2])
RANK = int(os.environ["THREELC_RANK"])
SIZE = int(os.environ["THREELC_SIZE"])
ELEMENTS = 4 << 20  # 16 MiB of float32 per allreduce: compressed, and long enough on the wire
ROUNDS = 400  # survivors give up after this many allreduces (a stall would take far fewer)


def out(line):
    print(line, flush=True)


def kill_self_later(seconds, sig):
    def fire():
        out(f"INJECT {FAULT} {time.monotonic():.3f}")
        os.kill(os.getpid(), sig)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def sockets_open():
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return count


def kill_self_at_third_socket():
    def watch():
        while sockets_open() < 3:
            time.sleep(0.0005)
        out(f"INJECT {FAULT} {time.monotonic():.3f}")
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()


def allreduce_rounds():
    if FAULT == "torch":
        import torch
        import threelc.torch as thvd
        x = torch.full((ELEMENTS,), float(RANK + 1))
        for i in range(ROUNDS):
            thvd.allreduce(x, name=f"grad.{i % 4}", op=thvd.Sum)
        return
    x = np.full(ELEMENTS, RANK + 1, np.float32)
    for i in range(ROUNDS):
        hvd.allreduce(x, name=f"grad.{i % 4}", op=hvd.Sum)
        if i == 0 and FAULT == "link":
            out("RUNNING")


def survive(body):
    try:
        body()
    except ThreelcError as e:
        out(f"ERROR {engine.error_name(e.code)} {time.monotonic():.3f} {str(e)!r}")
        raise
    out("NOERROR")
    sys.exit(2)


def main():
    if FAULT in ("prestart", "startup"):
        if RANK == VICTIM:
            if FAULT == "prestart":
                out(f"INJECT {FAULT} {time.monotonic():.3f}")
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(1.5)
            kill_self_at_third_socket()
            threelc.init()
            out("INIT RETURNED")  # the fault came too late: the test says so
            time.sleep(60)
            return
        survive(lambda: (threelc.init(), allreduce_rounds()))
        return

    threelc.init()
    hvd.allreduce(np.ones(16, np.float32), name="warmup", op=hvd.Sum)
    if FAULT in ("negotiation", "stall_negotiation"):
        if RANK == VICTIM:
            kill_self_later(1.0, signal.SIGKILL if FAULT == "negotiation" else signal.SIGSTOP)
            time.sleep(60)
            return
        survive(lambda: hvd.allreduce(np.ones(16, np.float32), name="never", op=hvd.Sum))
        return

    if RANK == VICTIM and FAULT in ("push_pull", "torch", "stall"):
        kill_self_later(1.0 if FAULT != "torch" else 3.0,
                        signal.SIGSTOP if FAULT == "stall" else signal.SIGKILL)
    elif RANK == VICTIM and FAULT != "link":
        raise SystemExit(f"fault_worker.py: unknown fault {FAULT!r}")
    survive(allreduce_rounds)


if __name__ == "__main__":
    main()
