#!/usr/bin/python3
"""One rank of tools/eval/evaluate's allreduce measurement: real gradients, one system.

    threelcrun -np 4 /usr/bin/python3 tools/eval/allreduce_job.py --system threelc ...
    mpirun -np 4 /usr/bin/python3 tools/eval/allreduce_job.py --system mpi ...

Every rank sums one float32 tensor of S MB (S * 10^6 bytes) taken from the gradients file
(tools/eval/gradients.py): rank r's tensor starts at gradient step r, so ranks hold different,
real gradients. --warmup untimed calls, a barrier, then the timed calls; the time of a call
is rank 0's wall time from the call to its result (all systems are synchronous here); rank 0
prints one JSON line per size with the median. The number of timed calls is at least --iters
and more for fast systems, up to 20, so that they add up to about --min-seconds: every rank
divides --min-seconds by the slowest rank's warm-up time (an allreduce of it). As in a
training step, every system reduces into a buffer allocated once: threelc and MPI write a
preallocated output (the input stays as it is), gloo reduces in place into a tensor the input
is copied into before each call, outside the timed region.

systems:
  threelc  threelc.engine.allreduce into the output buffer, op Sum, compression 3LC with
           --sparsity (THREELC_ALLREDUCE picks the algorithm), or --compression none
  gloo     torch.distributed all_reduce (gloo backend), rendezvous at THREELC_COORDINATOR's
           host and port + 1 (the engine is not started)
  mpi      mpi4py's COMM_WORLD.Allreduce (Open MPI), rank and size from MPI
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def tensor_for(gradients: np.ndarray, step_values: int, rank: int, count: int) -> np.ndarray:
    """count values of the gradient stream starting at step `rank` (cyclic)."""
    start = (rank * step_values) % gradients.size
    idx = (start + np.arange(count, dtype=np.int64)) % gradients.size
    return np.ascontiguousarray(gradients[idx], dtype=np.float32)


class Threelc:
    def __init__(self, args):
        import threelc.engine as engine
        self.engine = engine
        engine.init()
        self.rank, self.size = engine.rank(), engine.size()
        self.compression = (engine.Compression.none if args.compression == "none"
                            else engine.Compression.threelc)
        self.sparsity = args.sparsity

    def prepare(self, x):
        self.out = np.empty_like(x)

    def allreduce(self, x, name):
        return self.engine.allreduce(x, self.out, name=name, op=self.engine.Sum,
                                     compression=self.compression,
                                     sparsity=self.sparsity).wait()

    def barrier(self):
        self.engine.barrier().wait()

    def max_of(self, value):
        from_all = self.engine.allgather(np.array([value], np.float64)).wait()
        return float(np.max(from_all))

    def wire_bytes(self):
        return self.engine.statistics().wire_bytes_sent

    def close(self):
        self.engine.shutdown()


class Gloo:
    def __init__(self, args):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        torch.set_num_threads(1)
        self.rank, self.size = int(os.environ["THREELC_RANK"]), int(os.environ["THREELC_SIZE"])
        host, port = os.environ["THREELC_COORDINATOR"].rsplit(":", 1)
        dist.init_process_group("gloo", init_method=f"tcp://{host}:{int(port) + 1}",
                                rank=self.rank, world_size=self.size)

    def prepare(self, x):
        self.buffer = self.torch.empty(x.size, dtype=self.torch.float32)
        self.input = self.torch.from_numpy(x)

    def restore(self):
        self.buffer.copy_(self.input)

    def allreduce(self, x, name):
        self.dist.all_reduce(self.buffer)
        return self.buffer

    def barrier(self):
        self.dist.barrier()

    def max_of(self, value):
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def wire_bytes(self):
        return None

    def close(self):
        self.dist.destroy_process_group()


class Mpi:
    def __init__(self, args):
        from mpi4py import MPI
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def prepare(self, x):
        self.out = np.empty_like(x)

    def allreduce(self, x, name):
        self.comm.Allreduce(x, self.out)
        return self.out

    def barrier(self):
        self.comm.Barrier()

    def max_of(self, value):
        from mpi4py import MPI
        return float(self.comm.allreduce(value, op=MPI.MAX))

    def wire_bytes(self):
        return None

    def close(self):
        pass


SYSTEMS = {"threelc": Threelc, "gloo": Gloo, "mpi": Mpi}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--system", choices=sorted(SYSTEMS), required=True)
    p.add_argument("--gradients", required=True, help=".npy file from tools/eval/gradients.py")
    p.add_argument("--step-values", type=int, required=True,
                   help="values of one gradient step in the file (the model's size)")
    p.add_argument("--sizes-mb", default="4,25,100")
    p.add_argument("--iters", type=int, default=1, help="at least this many timed calls")
    p.add_argument("--min-seconds", type=float, default=2.0,
                   help="more timed calls (up to 20) while they take less than this")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls (at least 1)")
    p.add_argument("--compression", choices=["threelc", "none"], default="threelc")
    p.add_argument("--sparsity", type=float, default=1.0)
    p.add_argument("--label", default="", help="copied into every JSON line")
    args = p.parse_args()

    gradients = np.load(args.gradients, mmap_mode="r")
    system = SYSTEMS[args.system](args)
    for index, mb in enumerate(float(s) for s in args.sizes_mb.split(",")):
        count = int(mb * 1e6) // 4
        x = tensor_for(gradients, args.step_values, system.rank, count)
        name = f"eval/{index}/{count}"
        system.prepare(x)
        restore = getattr(system, "restore", lambda: None)
        warmup_seconds = 0.0
        for _ in range(max(1, args.warmup)):
            restore()
            started = time.perf_counter()
            system.allreduce(x, name)
            warmup_seconds = time.perf_counter() - started
        slowest = system.max_of(warmup_seconds)
        iters = max(args.iters, min(20, int(args.min_seconds / max(slowest, 1e-6))))
        system.barrier()
        times = []
        sent_before = system.wire_bytes()
        for _ in range(iters):
            restore()
            started = time.perf_counter()
            system.allreduce(x, name)
            times.append(time.perf_counter() - started)
        sent = system.wire_bytes()
        if system.rank == 0:
            record = {
                "system": args.system, "label": args.label, "ranks": system.size,
                "bytes": count * 4, "iters": iters,
                "seconds": round(statistics.median(times), 6),
                "seconds_all": [round(t, 6) for t in times],
                "threelc_allreduce": os.environ.get("THREELC_ALLREDUCE", "push_pull"),
            }
            if args.system == "threelc":
                record["compression"] = args.compression
                record["sparsity"] = args.sparsity if args.compression == "threelc" else None
                record["wire_bytes_per_rank"] = (sent - sent_before) // iters
                record["bits_per_value"] = round(8 * record["wire_bytes_per_rank"] / count, 4)
            print(json.dumps(record), flush=True)
        system.barrier()
    system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
