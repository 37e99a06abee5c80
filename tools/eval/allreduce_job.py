#!/usr/bin/python3
"""One rank of tools/evaluate's allreduce measurement: real gradients, one system.

    threelcrun -np 4 /usr/bin/python3 tools/eval/allreduce_job.py --system threelc ...
    mpirun -np 4 /usr/bin/python3 tools/eval/allreduce_job.py --system mpi ...

Every rank sums one float32 tensor of S MB (S * 10^6 bytes) taken from the gradients file
(tools/eval/gradients.py): rank r's tensor starts at gradient step r, so ranks hold different,
real gradients. --warmup untimed calls, a barrier, then --iters timed calls; the time of a call
is rank 0's wall time from the call to its result (all systems are synchronous here); rank 0
prints one JSON line per size with the median.

systems:
  threelc  threelc.numpy.allreduce, op Sum, compression 3LC with --sparsity (THREELC_ALLREDUCE
           picks the algorithm), or --compression none
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
        import threelc.numpy as hvd
        self.hvd = hvd
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.compression = (hvd.Compression.none if args.compression == "none"
                            else hvd.Compression.threelc)
        self.sparsity = args.sparsity

    def allreduce(self, x, name):
        return self.hvd.allreduce(x, name=name, op=self.hvd.Sum, compression=self.compression,
                                  sparsity=self.sparsity)

    def barrier(self):
        self.hvd.barrier()

    def wire_bytes(self):
        return self.hvd.statistics().wire_bytes_sent

    def close(self):
        self.hvd.shutdown()


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

    def allreduce(self, x, name):
        t = self.torch.from_numpy(x.copy())
        self.dist.all_reduce(t)
        return t.numpy()

    def barrier(self):
        self.dist.barrier()

    def wire_bytes(self):
        return None

    def close(self):
        self.dist.destroy_process_group()


class Mpi:
    def __init__(self, args):
        from mpi4py import MPI
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def allreduce(self, x, name):
        out = np.empty_like(x)
        self.comm.Allreduce(x, out)
        return out

    def barrier(self):
        self.comm.Barrier()

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
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
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
        for _ in range(args.warmup):
            system.allreduce(x, name)
        system.barrier()
        times = []
        sent_before = system.wire_bytes()
        for _ in range(args.iters):
            started = time.perf_counter()
            system.allreduce(x, name)
            times.append(time.perf_counter() - started)
        sent = system.wire_bytes()
        if system.rank == 0:
            record = {
                "system": args.system, "label": args.label, "ranks": system.size,
                "bytes": count * 4, "iters": args.iters,
                "seconds": round(statistics.median(times), 6),
                "seconds_all": [round(t, 6) for t in times],
                "threelc_allreduce": os.environ.get("THREELC_ALLREDUCE", "push_pull"),
            }
            if args.system == "threelc":
                record["compression"] = args.compression
                record["sparsity"] = args.sparsity if args.compression == "threelc" else None
                record["wire_bytes_per_rank"] = (sent - sent_before) // args.iters
                record["bits_per_value"] = round(8 * record["wire_bytes_per_rank"] / count, 4)
            print(json.dumps(record), flush=True)
        system.barrier()
    system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
