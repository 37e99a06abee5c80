"""What the two data-parallel Fashion-MNIST examples share: their command-line options, the
rank's shard of the data, the learning-rate schedule, one epoch of training and the local part
of the evaluation. Each example keeps what differs: how it starts the job and averages
gradients (threelc.torch's DistributedOptimizer, or DistributedDataParallel with a hook), how
it sums over the ranks, and how it measures the bytes sent."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from fashion_mnist import BEST_LR, DATA_DIR, MODELS, load_split
from mixed_precision import MODES as AMP_MODES
from mixed_precision import MixedPrecision, unsupported


def add_training_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", choices=MODELS, default="cnn",
                    help="cnn (default: two convolutions, 322k parameters), mlp (two hidden "
                         "layers of 512, 670k parameters) or wide (two hidden layers of 3072, "
                         "11.9M parameters: communication-bound)")
    ap.add_argument("--sparsity", type=float, default=1.0,
                    help="3LC sparsity multiplier s in [1, 2) (default 1.0)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="model and data-order seed")
    ap.add_argument("--batch-size", type=int, default=64, help="per-rank batch (default 64)")
    ap.add_argument("--lr", type=float, default=None,
                    help="SGD learning rate (default: uncompressed training's best for the model "
                         "in the sweep of docs/ACCURACY.md, "
                         + ", ".join(f"{m} {lr}" for m, lr in BEST_LR.items()) + ")")
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                    help="learning rate over the run: cosine decay from --lr to 0 (default) "
                         "or constant")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--log-every", type=int, default=50, help="progress line every N steps")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop every epoch after this many steps (0: the whole epoch; for "
                         "smoke tests)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads per rank (default: cores / ranks on this host)")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--amp", nargs="?", const="fp16", choices=AMP_MODES, default=None,
                    help="mixed precision: the forward pass autocast to fp16 (--amp or --amp "
                         "fp16: with a GradScaler; torch 2.3 or later) or bf16 (--amp bf16); "
                         "default float32")


def check_training_arguments(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses (ap.error) --epochs, --sparsity and --lr out of range; --lr defaults to the
    model's best uncompressed rate."""
    if args.epochs < 1:
        ap.error("--epochs must be at least 1")
    if not 1.0 <= args.sparsity < 2.0:
        ap.error(f"--sparsity {args.sparsity} is outside [1, 2)")
    if args.lr is None:
        args.lr = BEST_LR[args.model]
    elif not args.lr > 0:
        ap.error(f"--lr {args.lr} must be positive")


def parse_training_arguments(ap: argparse.ArgumentParser, argv) -> argparse.Namespace:
    args = ap.parse_args(argv)
    check_training_arguments(ap, args)
    why_not = unsupported(args.amp)
    if why_not:
        ap.error(why_not)
    return args


def torch_threads(args, ranks_on_this_host: int) -> int:
    """--threads, or this host's cores shared among its ranks; set for torch."""
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, ranks_on_this_host))
    torch.set_num_threads(threads)
    return threads


class Shard(NamedTuple):
    train_x: torch.Tensor
    train_y: torch.Tensor
    indices: np.ndarray  # this rank's training images (every size-th from rank)
    test_x: torch.Tensor  # this rank's part of the test set
    test_y: torch.Tensor
    steps_per_epoch: int  # the same on every rank (the smallest shard's)


def load_shard(args, rank: int, size: int) -> Shard:
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    steps = (len(train_x) // size) // args.batch_size
    if args.max_steps > 0:
        steps = min(steps, args.max_steps)
    return Shard(train_x, train_y, np.arange(rank, len(train_x), size), test_x[rank::size],
                 test_y[rank::size], steps)


def lr_schedule(optimizer, args, total_steps: int):
    """Cosine decay from --lr to 0 over the run (or constant), stepped once per step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * step / total_steps))
        if args.schedule == "cosine" else 1.0)


def train_epoch(model, optimizer, schedule, shard: Shard, order: np.ndarray, args, epoch: int,
                rank: int, log: Callable, step_seconds: list,
                precision: MixedPrecision) -> float:
    """One epoch over `order` (this rank's images, shuffled), in `precision`; returns the
    summed loss and appends each step's wall time to `step_seconds`. Raises SystemExit naming
    the step where the loss stops being finite."""
    start = time.perf_counter()
    loss_sum = 0.0
    for step in range(1, shard.steps_per_epoch + 1):
        step_start = time.perf_counter()
        idx = torch.from_numpy(order[(step - 1) * args.batch_size: step * args.batch_size])
        optimizer.zero_grad()
        with precision.autocast():
            loss = F.cross_entropy(model(shard.train_x[idx]), shard.train_y[idx])
        precision.backward_and_step(loss, optimizer)
        schedule.step()
        loss_sum += loss.item()
        step_seconds.append(time.perf_counter() - step_start)
        if not np.isfinite(loss.item()):
            raise SystemExit(f"rank {rank}: loss is {loss.item()} at epoch {epoch} step "
                             f"{step}: training diverged")
        if step % args.log_every == 0:
            rate = step / (time.perf_counter() - start)
            log(f"  epoch {epoch} step {step}/{shard.steps_per_epoch} loss "
                f"{loss_sum / step:.4f} ({rate:.1f} steps/s)", flush=True)
    return loss_sum


def evaluate_locally(model, x, y, batch: int = 1000) -> torch.Tensor:
    """[correct, count, summed loss] over this rank's test images (float64); the examples sum
    it over the ranks."""
    model.eval()
    correct, loss = 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            out = model(x[i: i + batch])
            loss += F.cross_entropy(out, y[i: i + batch], reduction="sum").item()
            correct += (out.argmax(1) == y[i: i + batch]).sum().item()
    model.train()
    return torch.tensor([correct, float(len(x)), loss], dtype=torch.float64)


def exit_without_teardown() -> None:
    """Ends a torch.distributed rank here, its output flushed, skipping the interpreter's
    teardown: there torch 1.13 can deadlock (a rank hung in about one run in ten): freeing
    DDP's reducer joins gloo's worker thread while holding the GIL, and that thread may be
    freeing a tensor, which needs the GIL. Call it after a barrier."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
