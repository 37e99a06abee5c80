#!/usr/bin/python3
"""gloo_bench: torch.distributed's gloo all_reduce, timed like `threelc-bench allreduce`.

Run one process per rank under threelcrun (or torchrun):

    tools/threelcrun -np 4 /usr/bin/python3 tools/bench/gloo_bench.py --size-mb 1,16,100 --json

Rank 0 prints, per size, the same fields as `threelc-bench allreduce --json` with
"compression": "gloo". See docs/BENCHMARKS.md ("Allreduce vs gloo").
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import time

HELP_EPILOG = """\
rendezvous:
  rank and size come from THREELC_RANK / THREELC_SIZE (threelcrun), else RANK / WORLD_SIZE
  (torchrun). torch.distributed.init_process_group("gloo") meets the other ranks at
  tcp://MASTER_ADDR:MASTER_PORT when both are set, else at THREELC_COORDINATOR's host and
  port + --port-offset (default 0: this script never starts the threelc engine, so the port
  threelcrun found free for the coordinator is free for torch's store).

measurement:
  one float32 tensor of S MiB (S * 2^20 bytes) of Gaussian values (sigma 0.01, torch.randn
  seeded with 1000 + rank), the same values every iteration; dist.all_reduce(SUM) in place
  (a copy of the input is restored between iterations, outside the timed region).
  --warmup untimed iterations, then --iters timed ones; rank 0's wall time from the call to
  its return (the call is synchronous), median over the iterations. No barrier between
  iterations, exactly as `threelc-bench allreduce`. wire_bytes_per_rank is what gloo's ring
  allreduce sends per rank, 2 (N-1)/N * bytes: the algorithm's count, not a measurement.
  torch runs with one intra-op thread (torch.set_num_threads(1)); gloo's own threads are as
  torch starts them.
"""


def parse_sizes(text):
    sizes = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        value = float(item)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"size {item!r} must be > 0")
        sizes.append(value)
    if not sizes:
        raise argparse.ArgumentTypeError("no sizes given")
    return sizes


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 1")
    return value


def nonnegative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0")
    return value


def build_parser():
    p = argparse.ArgumentParser(
        prog="gloo_bench.py", description=__doc__.splitlines()[0], epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--size-mb", type=parse_sizes, default=[1.0, 16.0, 100.0], metavar="S[,S...]",
                   help="tensor sizes in MiB (default 1,16,100)")
    p.add_argument("--iters", type=positive_int, default=10, metavar="N",
                   help="timed iterations per size (default 10)")
    p.add_argument("--warmup", type=nonnegative_int, default=1, metavar="W",
                   help="untimed iterations before them (default 1)")
    p.add_argument("--port-offset", type=int, default=0, metavar="K",
                   help="torch's store listens on THREELC_COORDINATOR's port + K (default 0)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds torch.distributed waits for the other ranks (default 120)")
    p.add_argument("--json", action="store_true", help="rank 0 prints one JSON object per size")
    return p


def rank_and_size():
    for rank_var, size_var in (("THREELC_RANK", "THREELC_SIZE"), ("RANK", "WORLD_SIZE")):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    return 0, 1


def init_method(port_offset):
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if addr and port:
        return f"tcp://{addr}:{int(port)}"
    coordinator = os.environ.get("THREELC_COORDINATOR")
    if coordinator:
        host, _, port = coordinator.rpartition(":")
        port = int(port) + port_offset
        if not 1 <= port <= 65535:
            raise SystemExit(f"gloo_bench: port {port} (THREELC_COORDINATOR + {port_offset}) "
                             "is out of range")
        return f"tcp://{host}:{port}"
    return None


def main(argv=None):
    args = build_parser().parse_args(argv)
    rank, size = rank_and_size()
    method = init_method(args.port_offset)
    if method is None and size > 1:
        print("gloo_bench: set THREELC_COORDINATOR (threelcrun) or MASTER_ADDR/MASTER_PORT",
              file=sys.stderr)
        return 2
    if method is None:  # one rank on its own: any free port for torch's store
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            method = f"tcp://127.0.0.1:{s.getsockname()[1]}"

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        if rank == 0 and not args.json:
            print(f"{'bytes':>12} {'ranks':>6} {'iters':>6} {'median s':>10} {'min s':>10} "
                  f"{'max s':>10} {'algbw GB/s':>11} {'wire B/rank':>13}", flush=True)
        for size_mb in args.size_mb:
            count = int(size_mb * (1 << 20)) // 4
            nbytes = count * 4
            generator = torch.Generator().manual_seed(1000 + rank)
            source = torch.randn(count, generator=generator, dtype=torch.float32) * 0.01
            tensor = source.clone()
            times = []
            for i in range(args.warmup + args.iters):
                tensor.copy_(source)
                start = time.perf_counter()
                dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
                elapsed = time.perf_counter() - start
                if i >= args.warmup:
                    times.append(elapsed)
            # A loose check that the sum happened: the result's variance is about size times
            # the input's (independent Gaussians per rank).
            ratio = float(tensor.var() / source.var()) if count > 1 else float(size)
            if count > 1000 and not 0.5 * size < ratio < 2.0 * size:
                print(f"gloo_bench: rank {rank}: result variance is {ratio:.3f}x the input's, "
                      f"expected about {size}", file=sys.stderr)
                return 1
            del source, tensor
            if rank != 0:
                continue
            median = statistics.median(times)
            wire = 2 * (size - 1) * nbytes // size
            record = {
                "op": "allreduce", "compression": "gloo", "ranks": size, "bytes": nbytes,
                "iters": args.iters, "warmup": args.warmup,
                "time_s_median": round(median, 6), "time_s_min": round(min(times), 6),
                "time_s_max": round(max(times), 6),
                "algbw_gbps": round(nbytes / median / 1e9, 4),
                "wire_bytes_per_rank": wire, "wire_bytes_source": "ring algorithm 2(N-1)/N",
            }
            if args.json:
                print(json.dumps(record), flush=True)
            else:
                print(f"{nbytes:>12} {size:>6} {args.iters:>6} {median:>10.5f} {min(times):>10.5f} "
                      f"{max(times):>10.5f} {record['algbw_gbps']:>11.3f} {wire:>13}", flush=True)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
