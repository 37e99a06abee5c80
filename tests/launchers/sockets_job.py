"""A job that tells over which addresses its ranks talk: ``<launcher> -n 4 python
sockets_job.py``. Each rank joins, runs one allreduce and prints ``SOCKETS v4 <n> v6 <m>``:
how many of its own TCP connections are established on 127.0.0.1 and on ::1 (from
/proc/net/tcp{,6} and the socket inodes of its /proc/self/fd).
"""

import os

import numpy as np

import threelc
import threelc.numpy as tn

ESTABLISHED = "01"
LOOPBACK = {"tcp": "0100007F", "tcp6": "00000000000000000000000001000000"}


def own_sockets() -> set:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def established_on_loopback(table: str, inodes: set) -> int:
    count = 0
    with open(f"/proc/net/{table}") as f:
        next(f)
        for row in f:
            fields = row.split()
            address = fields[1].split(":")[0]
            if fields[3] == ESTABLISHED and fields[9] in inodes and address == LOOPBACK[table]:
                count += 1
    return count


threelc.init()
tn.allreduce(np.ones(1 << 16, np.float32), name="x", op=threelc.Sum)
inodes = own_sockets()
print(f"SOCKETS v4 {established_on_loopback('tcp', inodes)} "
      f"v6 {established_on_loopback('tcp6', inodes)}", flush=True)
threelc.shutdown()
