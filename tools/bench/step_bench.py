#!/usr/bin/python3
"""step_bench: a training step's worth of small tensors, gloo against threelc, from Python.

Run one process per rank under threelcrun, once per backend:

    tools/threelcrun -np 4 /usr/bin/python3 tools/bench/step_bench.py --backend gloo --json
    tools/threelcrun -np 4 /usr/bin/python3 tools/bench/step_bench.py --backend threelc --json
    tools/threelcrun -np 4 /usr/bin/python3 tools/bench/step_bench.py --backend none --json

A step allreduces (sum, in place) --tensors float32 tensors of --bytes bytes each, as a
framework hands over a model's gradients: every tensor is started asynchronously, then the step
waits for all of them. gloo: torch.distributed.all_reduce(async_op=True) and Work.wait();
threelc: the submission DistributedOptimizer makes for each gradient (in place, a fixed name per
tensor, so the response cache and fusion work as they do in training; 3LC where the engine
compresses, raw for `none`) and synchronize. The
values are the same every step (Gaussian, sigma 0.01, seeded per rank and tensor). --warmup
untimed steps, then --steps timed ones, no barrier between them; a step's time is rank 0's wall
time from the first start to the last wait; the median is reported. Rank 0 prints one JSON line
per (tensors, bytes) with --json. tools/bench/small_tensors_vs_gloo.sh runs the three backends
over a grid and prints a table; docs/BENCHMARKS.md has the figures.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gloo_bench import init_method, rank_and_size  # noqa: E402


def parse_list(text):
    values = [int(item) for item in text.split(",") if item.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of integers >= 1")
    return values


def build_parser():
    p = argparse.ArgumentParser(prog="step_bench.py", description=__doc__.splitlines()[0],
                                allow_abbrev=False)
    p.add_argument("--backend", choices=("gloo", "threelc", "none"), required=True,
                   help="gloo, threelc (3LC where the engine compresses), none (threelc raw)")
    p.add_argument("--tensors", type=parse_list, default=[1, 100], metavar="N[,N...]",
                   help="tensors per step (default 1,100)")
    p.add_argument("--bytes", type=parse_list, default=[1024, 65536], metavar="B[,B...]",
                   help="bytes per tensor, a multiple of 4 (default 1024,65536)")
    p.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--json", action="store_true", help="rank 0 prints one JSON line per case")
    return p


class Gloo:
    name = "gloo"

    def __init__(self, rank, size):
        import torch.distributed as dist
        self.dist = dist
        dist.init_process_group("gloo", init_method=init_method(0), rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=120))

    def step(self, tensors, names):
        works = [self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM, async_op=True)
                 for t in tensors]
        for work in works:
            work.wait()

    def close(self):
        self.dist.destroy_process_group()


class Threelc:
    def __init__(self, compress):
        import threelc.torch as hvd
        from threelc.torch import _internal
        from threelc.torch.compression import engine_compression
        self.hvd = hvd
        self.submit = _internal.submit_with_wire
        self.name = "threelc" if compress else "none"
        self.wire = engine_compression(hvd.Compression.threelc if compress
                                       else hvd.Compression.none)
        hvd.init()

    def step(self, tensors, names):
        handles = [self.submit(t, True, n, self.hvd.Sum, 1.0, 1.0, self.wire)
                   for t, n in zip(tensors, names)]
        for handle in handles:
            self.hvd.synchronize(handle)

    def close(self):
        self.hvd.shutdown()


def run_case(backend, rank, size, count, nbytes, args):
    import torch
    elements = nbytes // 4
    sources = [torch.randn(elements, generator=torch.Generator().manual_seed(
        1000 * (rank + 1) + i)) * 0.01 for i in range(count)]
    tensors = [s.clone() for s in sources]
    names = [f"step_bench/{count}x{nbytes}/{i}" for i in range(count)]
    times = []
    results = torch.zeros(elements)  # the first tensor's results, summed over the steps
    for step in range(args.warmup + args.steps):
        for t, s in zip(tensors, sources):
            t.copy_(s)
        start = time.perf_counter()
        backend.step(tensors, names)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
        results += tensors[0]
    # The sum happened: the first tensor's mean result is the sum of every rank's source (3LC's
    # error feedback makes one step's result far from it, and the mean over the steps close).
    want = sum(torch.randn(elements, generator=torch.Generator().manual_seed(1000 * (r + 1)))
               * 0.01 for r in range(size))
    mean = results / (args.warmup + args.steps)
    error = float((mean - want).norm() / want.norm())
    if error > 0.5:
        raise SystemExit(f"step_bench: rank {rank}: {backend.name}'s sum is off by "
                         f"{error:.3f} (relative L2)")
    return {"op": "step", "backend": backend.name, "ranks": size, "tensors": count,
            "bytes": nbytes, "steps": args.steps, "warmup": args.warmup,
            "time_s_median": round(statistics.median(times), 7),
            "time_s_min": round(min(times), 7), "time_s_max": round(max(times), 7),
            "rel_error_of_mean": round(error, 6)}


def main(argv=None):
    args = build_parser().parse_args(argv)
    if any(b % 4 for b in args.bytes):
        raise SystemExit("step_bench: --bytes must be multiples of 4 (float32 tensors)")
    rank, size = rank_and_size()
    import torch
    torch.set_num_threads(1)
    backend = Gloo(rank, size) if args.backend == "gloo" else Threelc(args.backend == "threelc")
    try:
        for count in args.tensors:
            for nbytes in args.bytes:
                record = run_case(backend, rank, size, count, nbytes, args)
                if rank == 0:
                    print(json.dumps(record) if args.json else
                          f"{record['backend']:>8} {count:>5} x {nbytes:>7} B: "
                          f"{record['time_s_median'] * 1e3:8.3f} ms a step", flush=True)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
