#!/usr/bin/env python3
"""Data-parallel training of a CNN on Fashion-MNIST with torch's DistributedDataParallel.

    PYTHONPATH=frameworks/python tools/torchrun --standalone --nproc_per_node 4 \
        examples/train_fashion_mnist_ddp.py [--hook threelc|none|fp16|bf16|powersgd] \
        [--sparsity S] [--powersgd-rank R] [--bucket-cap-mb MB] [--epochs E] [--seed K] \
        [--lr LR] [--batch-size B] [--max-steps N] [--amp [fp16|bf16]]

The DistributedDataParallel twin of train_fashion_mnist.py (threelc.torch's Horovod API): the
same CNN, data, per-rank batch, sharding by rank, seeds and learning-rate schedule, so the two
can be compared run for run. torch.distributed is started with the gloo backend (torchrun's
env://) and the Net is wrapped in DistributedDataParallel. With --hook threelc (the default)
one line hands DDP's gradient buckets to the threelc engine, 3LC-compressed with error feedback:

    model.register_comm_hook(threelc.torch.DDPHookState(sparsity=...), threelc.torch.ddp_comm_hook)

With --hook none DDP keeps its default: an uncompressed gloo allreduce of every bucket. The
other hooks are the compressors torch ships, for comparison: fp16 and bf16 (torch's
fp16_compress_hook / bf16_compress_hook: each bucket cast to 16 bits, allreduced by gloo, cast
back) and powersgd (torch's PowerSGD hook: rank --powersgd-rank approximations with error
feedback and warm start, as the PowerSGD paper recommends, after --powersgd-start-step
uncompressed steps). torch 1.13's PowerSGD over gloo fails when DDP has more than one bucket
("op.preamble.length <= op.nbytes"): --bucket-cap-mb 1000 puts every gradient in one (the
first bucket too, which DDP otherwise caps at 1 MiB).

--amp trains in mixed precision as the Horovod-style example does (examples/mixed_precision.py):
float16 autocast with a GradScaler, or --amp bf16.

Rank 0 prints progress while it trains and, per epoch, the mean training loss, the test loss
and accuracy (10,000 images, evaluated in shards and summed), the bytes each rank sent and
the training time; the last line is one JSON object with the run's results and settings.

Bytes sent (mb_sent_per_rank) are measured the same way in both modes: the kernel's TCP
counter tcp_info bytes_sent (payload bytes handed to TCP, retransmissions included) summed over
every TCP socket this process owns -- gloo's, the threelc engine's, torch's store -- read with
`ss -tinpH` (iproute2). They are read just before the first training step of an epoch and just
after its last step, so they cover the training steps only (as the Horovod example does), and
are averaged over the ranks. mb_sent_with_setup_per_rank is the same counter from the start of
the process to after the last step: it adds the rendezvous, DDP's initial broadcast of the
parameters, the engine's start and the evaluations (sockets already closed by then are not
counted). In threelc mode engine_mb_sent_per_rank is the engine's own count
(threelc.torch.statistics().wire_bytes_sent, training steps only, averaged over ranks): its
data channels only, so it leaves out the engine's negotiation with rank 0's coordinator (and
gloo's few bytes), which mb_sent_per_rank includes. The Horovod example's ratio is computed
from that engine count, so this example's 3LC ratio is the stricter of the two.

compression_ratio = ring_mb_per_rank / mb_sent_per_rank, where ring_mb_per_rank is computed, not
measured: the bytes a ring allreduce of the uncompressed gradients sends per rank,
2 (N-1)/N x gradient bytes (every trainable parameter, float32) x training steps. With
--hook none it is about 1 (gloo's allreduce is such a ring; framing and DDP's few control
messages make it slightly less), with --hook threelc it is what 3LC saves on the wire.
If `ss` is missing the byte counts and the ratio are null (with a note on stderr).

tools/torchrun is torchrun with two faults of Debian's torch 1.13 mended (it does not start
under Python 3.11; --standalone always takes port 29400); with torch 2, plain torchrun.
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
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ddp_hooks import (SS, add_hook_arguments, average, check_hook_arguments,  # noqa: E402
                       describe_hook, engine_bytes_sent, note_without_ss, tcp_bytes_sent,
                       wrap)
from fashion_mnist import make_model  # noqa: E402
from mixed_precision import MixedPrecision  # noqa: E402
from training import (add_training_arguments, evaluate_locally,  # noqa: E402
                      exit_without_teardown, load_shard, lr_schedule, parse_training_arguments,
                      torch_threads, train_epoch)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_hook_arguments(ap)
    add_training_arguments(ap)
    args = parse_training_arguments(ap, argv)
    check_hook_arguments(ap, args)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    dist.init_process_group("gloo")  # env:// from torchrun
    rank, size = dist.get_rank(), dist.get_world_size()
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", size))
    threads = torch_threads(args, local_size)
    torch.manual_seed(args.seed)
    log = print if rank == 0 else (lambda *a, **k: None)
    if rank == 0:
        note_without_ss()

    shard = load_shard(args, rank, size)
    steps_per_epoch = shard.steps_per_epoch

    # The Horovod example's model. DDP broadcasts rank 0's parameters when it wraps the model,
    # as hvd.broadcast_parameters does there.
    net = make_model(args.model)
    model = wrap(net, args, dict(sparsity=args.sparsity))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    schedule = lr_schedule(optimizer, args, steps_per_epoch * args.epochs)
    precision = MixedPrecision(args.amp)

    params = sum(p.numel() for p in model.parameters())
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    mode = describe_hook(args, dict(sparsity=args.sparsity))
    log(f"DistributedDataParallel: {args.model.upper()} ({params} parameters) on Fashion-MNIST, "
        f"{size} ranks x batch {args.batch_size}, {steps_per_epoch} steps per epoch, "
        f"{args.epochs} epochs, {mode}, {precision.describe()}, {threads} torch thread(s) per "
        f"rank", flush=True)

    rng = np.random.default_rng(args.seed)
    step_seconds = []  # this rank's, every step
    measured = SS is not None
    sent_total, engine_total, accuracy, test_loss, train_seconds = 0.0, 0.0, 0.0, 0.0, 0.0
    for epoch in range(1, args.epochs + 1):
        order = shard.indices[rng.permutation(len(shard.indices))]  # the same on every rank
        sent0, engine0 = tcp_bytes_sent(), engine_bytes_sent(args.hook)
        epoch_start = time.perf_counter()
        loss_sum = train_epoch(model, optimizer, schedule, shard, order, args, epoch, rank, log,
                               step_seconds, precision)
        epoch_seconds = time.perf_counter() - epoch_start
        train_seconds += epoch_seconds
        sent1, engine1 = tcp_bytes_sent(), engine_bytes_sent(args.hook)
        sent = (sent1 - sent0) if measured else 0
        sent_avg, engine_avg, loss_avg = average(
            [float(sent), float(engine1 - engine0), loss_sum], size)
        sent_total += sent_avg
        engine_total += engine_avg
        ring = 2 * (size - 1) / size * grad_bytes * steps_per_epoch
        totals = evaluate_locally(model.module, shard.test_x, shard.test_y)
        dist.all_reduce(totals)
        correct, count, test_loss_sum = totals.tolist()
        accuracy, test_loss = correct / count, test_loss_sum / count
        traffic = (f"sent {sent_avg / 1e6:.2f} MB per rank, compression {ring / sent_avg:.1f}x"
                   if measured and sent_avg else "bytes sent not measured (no ss)")
        log(f"epoch {epoch}: loss {loss_avg / steps_per_epoch:.4f}, test loss {test_loss:.4f}, "
            f"test accuracy {accuracy:.4f}, {traffic}, {epoch_seconds:.1f} s", flush=True)

    # Everything this process sent from its start to now (after the last step and evaluation,
    # before teardown), averaged over the ranks.
    with_setup = tcp_bytes_sent() if measured else 0
    with_setup_avg, = average([float(with_setup)], size)
    seconds = time.perf_counter() - start
    steps = steps_per_epoch * args.epochs
    ring_total = 2 * (size - 1) / size * grad_bytes * steps
    summary = {
        "test_accuracy": round(accuracy, 4),
        "model": args.model,
        "test_loss": round(test_loss, 4),
        "compression_ratio": round(ring_total / sent_total, 2) if measured and sent_total
        else None,
        "mb_sent_per_rank": round(sent_total / 1e6, 3) if measured else None,
        "ring_mb_per_rank": round(ring_total / 1e6, 3),
        "mb_sent_with_setup_per_rank": round(with_setup_avg / 1e6, 3) if measured else None,
        "engine_mb_sent_per_rank": round(engine_total / 1e6, 3) if args.hook == "threelc"
        else None,
        "bytes_measured_by": "ss tcp_info bytes_sent" if measured else None,
        "seconds": round(seconds, 2),
        "train_seconds": round(train_seconds, 2),
        # Rank 0's median step (forward, backward, allreduce, optimizer step): robust to the
        # pauses of a shared machine that a mean over the epoch includes.
        "median_step_seconds": round(float(np.median(step_seconds)), 5),
        "seconds_per_epoch": round(train_seconds / args.epochs, 2),
        "hook": args.hook,
        "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
        "bucket_cap_mb": args.bucket_cap_mb,
        "ranks": size,
        "epochs": args.epochs,
        "steps": steps,
        "batch_size": args.batch_size,
        "sparsity": args.sparsity if args.hook == "threelc" else None,
        "seed": args.seed,
        "lr": args.lr,
        "schedule": args.schedule,
        "amp": args.amp,
        # Steps the GradScaler skipped on every rank (their gradients overflowed): --amp fp16.
        "amp_skipped_steps": precision.skipped_steps,
    }
    log(json.dumps(summary), flush=True)
    dist.barrier()
    exit_without_teardown()


if __name__ == "__main__":
    sys.exit(main())
