"""What the DistributedDataParallel examples share: the communication hook a run compares
(threelc's, DDP's default allreduce, or one of torch's compressors), wrapping the model in DDP
with it, and measuring the bytes each rank sends.

Hooks (--hook): threelc (3LC through the threelc engine: ``DDPHookState`` and
``ddp_comm_hook``), none (DDP's default gloo allreduce), fp16 and bf16 (torch's
fp16_compress_hook / bf16_compress_hook: each bucket cast to 16 bits, allreduced by gloo, cast
back) and powersgd (torch's PowerSGD hook: rank --powersgd-rank approximations with error
feedback and warm start, after --powersgd-start-step uncompressed steps). torch 1.13's
PowerSGD over gloo fails when DDP has more than one bucket ("op.preamble.length <= op.nbytes"):
--bucket-cap-mb 1000 puts every gradient in one (the first bucket too, which DDP otherwise caps
at 1 MiB).

Bytes sent are the kernel's TCP counter tcp_info bytes_sent (payload bytes handed to TCP,
retransmissions included) summed over every TCP socket this process owns -- gloo's, the
threelc engine's, torch's store -- read with `ss -tinpH` (iproute2); None without ss.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

HOOKS = ("threelc", "none", "fp16", "bf16", "powersgd")
SS = shutil.which("ss") or next((p for p in ("/usr/bin/ss", "/bin/ss", "/sbin/ss")
                                 if os.path.exists(p)), None)
_PID = re.compile(r"pid=(\d+),")
_BYTES_SENT = re.compile(r"\bbytes_sent:(\d+)")


def add_hook_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--hook", choices=HOOKS, default="threelc",
                    help="DDP communication hook: threelc (3LC through the threelc engine, "
                         "default), none (DDP's default gloo allreduce), or one of torch's: "
                         "fp16, bf16, powersgd")
    ap.add_argument("--powersgd-rank", type=int, default=2,
                    help="PowerSGD's matrix approximation rank (default 2)")
    ap.add_argument("--powersgd-start-step", type=int, default=10,
                    help="steps of uncompressed allreduce before PowerSGD starts (default 10)")
    ap.add_argument("--bucket-cap-mb", type=float, default=None,
                    help="DDP's bucket size in MiB, the first bucket's too (default: DDP's, "
                         "25, and 1 for the first)")


def check_hook_arguments(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.powersgd_rank < 1:
        ap.error(f"--powersgd-rank {args.powersgd_rank} must be at least 1")
    if args.powersgd_start_step < 2:  # torch's PowerSGDState refuses 1 with error feedback
        ap.error(f"--powersgd-start-step {args.powersgd_start_step} must be at least 2")
    if args.bucket_cap_mb is not None and not args.bucket_cap_mb > 0:
        ap.error(f"--bucket-cap-mb {args.bucket_cap_mb} must be positive")


def wrap(net: torch.nn.Module, args, threelc_options: dict) -> DistributedDataParallel:
    """`net` in DistributedDataParallel (which broadcasts rank 0's parameters) with the hook
    --hook names; `threelc_options` are the keyword arguments of threelc's DDPHookState."""
    bucket = {}
    if args.bucket_cap_mb is not None:
        # Every bucket, the first too (DDP caps it at 1 MiB otherwise; torch documents this
        # variable as the way to change that).
        bucket["bucket_cap_mb"] = args.bucket_cap_mb
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_cap_mb * 1024 * 1024)
    model = DistributedDataParallel(net, **bucket)
    if args.hook == "threelc":
        import threelc.torch  # noqa: PLC0415 (the other hooks run without the threelc library)

        model.register_comm_hook(threelc.torch.DDPHookState(**threelc_options),
                                 threelc.torch.ddp_comm_hook)
    elif args.hook in ("fp16", "bf16"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: PLC0415

        model.register_comm_hook(None, getattr(default_hooks, f"{args.hook}_compress_hook"))
    elif args.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook  # noqa: PLC0415

        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start_step, use_error_feedback=True,
            warm_start=True, random_seed=args.seed)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    return model


def describe_hook(args, threelc_options: dict) -> str:
    settings = ", ".join(f"{k} {v}" for k, v in threelc_options.items() if v is not None)
    return {"threelc": "3LC hook" + (f", {settings}" if settings else ""),
            "none": "DDP's gloo allreduce (no compression)",
            "fp16": "torch's fp16_compress_hook", "bf16": "torch's bf16_compress_hook",
            "powersgd": f"torch's PowerSGD hook, rank {args.powersgd_rank}"}[args.hook]


def note_without_ss() -> None:
    """Says on stderr, where `ss` is missing, that the bytes sent are not measured."""
    if SS is None:
        print("note: `ss` not found (Debian: apt-get install iproute2): the bytes sent cannot "
              "be measured; they and the compression ratio are reported as null",
              file=sys.stderr, flush=True)


def tcp_bytes_sent():
    """Payload bytes this process has sent over its open TCP sockets (tcp_info bytes_sent,
    summed), from `ss -tinpH`; None without ss. ss prints each socket as a line naming its
    owners (users:(("python3",pid=...,fd=...))) followed by an indented line of tcp_info
    (bytes_sent is left out while it is 0)."""
    if SS is None:
        return None
    out = subprocess.run([SS, "-tinpH"], capture_output=True, text=True, check=True).stdout
    pid, total, mine = str(os.getpid()), 0, False
    for line in out.splitlines():
        if line[:1] not in (" ", "\t"):  # a socket: is it ours?
            mine = pid in _PID.findall(line)
        elif mine:
            found = _BYTES_SENT.search(line)
            if found:
                total += int(found.group(1))
    return total


def engine_bytes_sent(hook: str) -> int:
    """The threelc engine's count of bytes sent on its data channels (0 for torch's hooks)."""
    if hook != "threelc":
        return 0
    import threelc.torch  # noqa: PLC0415 (only with the hook)

    return threelc.torch.statistics().wire_bytes_sent


def average(values, size: int) -> list:
    """The mean over every rank of each of `values` (float64, gloo)."""
    totals = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(totals)
    return (totals / size).tolist()
