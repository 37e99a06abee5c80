#!/usr/bin/env python3
"""Data-parallel training of a CNN on Fashion-MNIST with threelc.torch (Horovod's API).

    threelcrun -np 4 /usr/bin/python3 examples/train_fashion_mnist.py \
        [--compression threelc|fp16|none] [--sparsity S] [--epochs E] [--seed K] \
        [--amp [fp16|bf16]]

Every rank trains on its shard of the 60,000 training images; gradients are averaged over
the ranks by hvd.DistributedOptimizer, 3LC-compressed by the engine (error feedback kept per
parameter), unless --compression fp16 (Horovod's fp16: each gradient cast to float16 and sent
raw) or none. Rank 0 prints progress while it trains and, per epoch,
the mean training loss, the test accuracy (10,000 images, evaluated in shards and summed),
the bytes each rank sent and the compression ratio; the last line is one JSON object with
test_accuracy, compression_ratio and seconds (and the run's settings).

The compression ratio is the traffic an uncompressed allreduce of the same gradients would
send (push_pull moves 2 (N-1)/N of every tensor's bytes per rank) over the bytes the ranks
really sent while training (the engine's statistics); with --compression none it is about 1,
with fp16 about 2 (the uncompressed traffic is that of the float32 gradients).
The global batch is --batch-size x ranks and --lr is used as given (no scaling), so 4 ranks
of 64 and 8 ranks of 32 take the same steps. SGD with momentum; the learning rate decays from
--lr to 0 along a cosine over the whole run (--schedule constant keeps it).

--amp trains in mixed precision (examples/mixed_precision.py): the forward pass autocast to
float16 with a torch.amp.GradScaler (``scaler.scale(loss).backward(); scaler.step(optimizer);
scaler.update()`` on the DistributedOptimizer, as on a local one; torch 2.3 or later), or with
--amp bf16 to bfloat16. Gradients stay float32 and travel as without --amp.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import threelc.torch as hvd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fashion_mnist import make_model  # noqa: E402
from mixed_precision import MixedPrecision  # noqa: E402
from training import (add_training_arguments, evaluate_locally, load_shard,  # noqa: E402
                      lr_schedule, parse_training_arguments, torch_threads, train_epoch)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compression", choices=("threelc", "fp16", "none"), default="threelc",
                    help="gradient compression: threelc (default), fp16 (Horovod's) or none")
    add_training_arguments(ap)
    return parse_training_arguments(ap, argv)


def wire_bytes() -> tuple:
    s = hvd.statistics()
    return s.wire_bytes_sent, s.allreduce_bytes


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    threads = torch_threads(args, hvd.local_size())
    torch.manual_seed(args.seed)
    shard = load_shard(args, rank, size)
    steps_per_epoch = shard.steps_per_epoch

    model = make_model(args.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    compression = {"threelc": hvd.Compression.threelc(sparsity=args.sparsity),
                   "fp16": hvd.Compression.fp16, "none": hvd.Compression.none}[args.compression]
    # The allreduces' inputs are float32 gradients, or float16 ones with fp16 (half the bytes).
    input_to_float32 = 2 if args.compression == "fp16" else 1
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    schedule = lr_schedule(optimizer, args, steps_per_epoch * args.epochs)
    precision = MixedPrecision(args.amp)

    log = print if rank == 0 else (lambda *a, **k: None)
    params = sum(p.numel() for p in model.parameters())
    mode = {"threelc": f"3LC, sparsity {args.sparsity}", "fp16": "Horovod's fp16",
            "none": "no compression"}[args.compression]
    log(f"threelc.torch: {args.model.upper()} ({params} parameters) on Fashion-MNIST, {size} "
        f"ranks x batch {args.batch_size}, {steps_per_epoch} steps per epoch, {args.epochs} "
        f"epochs, {mode}, {precision.describe()}, {threads} torch thread(s) per rank", flush=True)

    rng = np.random.default_rng(args.seed)
    step_seconds = []  # this rank's, every step
    sent_total, raw_total, accuracy, train_seconds = 0, 0.0, 0.0, 0.0
    for epoch in range(1, args.epochs + 1):
        order = shard.indices[rng.permutation(len(shard.indices))]  # the same on every rank
        sent0, reduced0 = wire_bytes()
        epoch_start = time.perf_counter()
        loss_sum = train_epoch(model, optimizer, schedule, shard, order, args, epoch, rank, log,
                               step_seconds, precision)
        epoch_seconds = time.perf_counter() - epoch_start
        train_seconds += epoch_seconds
        sent1, reduced1 = wire_bytes()
        # Bytes this rank sent, and what an uncompressed push_pull of the float32 gradients
        # would have sent.
        sent = sent1 - sent0
        raw = (reduced1 - reduced0) * input_to_float32 * 2 * (size - 1) / size
        totals = hvd.allreduce(torch.tensor([float(sent), raw, loss_sum], dtype=torch.float64),
                               op=hvd.Average, name="epoch.traffic").tolist()
        sent_total += totals[0]
        raw_total += totals[1]
        correct, count, test_loss = hvd.allreduce(
            evaluate_locally(model, shard.test_x, shard.test_y), op=hvd.Sum,
            name="eval.totals").tolist()
        accuracy = correct / count
        ratio = totals[1] / totals[0] if totals[0] else float("nan")
        log(f"epoch {epoch}: loss {totals[2] / steps_per_epoch:.4f}, test loss "
            f"{test_loss / count:.4f}, test accuracy {accuracy:.4f}, sent "
            f"{totals[0] / 1e6:.2f} MB per rank, compression {ratio:.1f}x, {epoch_seconds:.1f} s",
            flush=True)

    seconds = time.perf_counter() - start
    ratio = raw_total / sent_total if sent_total else float("nan")
    summary = {
        "test_accuracy": round(accuracy, 4),
        "model": args.model,
        "compression_ratio": round(ratio, 2),
        "seconds": round(seconds, 2),
        "train_seconds": round(train_seconds, 2),
        # Rank 0's median step (forward, backward, allreduce, optimizer step): robust to the
        # pauses of a shared machine that a mean over the epoch includes.
        "median_step_seconds": round(float(np.median(step_seconds)), 5),
        "bytes_sent_per_rank": int(sent_total),
        "ranks": size,
        "epochs": args.epochs,
        "steps": steps_per_epoch * args.epochs,
        "compression": args.compression,
        "sparsity": args.sparsity if args.compression == "threelc" else None,
        "algorithm": os.environ.get("THREELC_ALLREDUCE", "push_pull"),
        "seed": args.seed,
        "lr": args.lr,
        "schedule": args.schedule,
        "amp": args.amp,
        # Steps the GradScaler skipped on every rank (their gradients overflowed): --amp fp16.
        "amp_skipped_steps": precision.skipped_steps,
    }
    log(json.dumps(summary), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
