#!/usr/bin/env python3
"""Data-parallel training of a GPT-2 (Hugging Face transformers) with AdamW under torch's
DistributedDataParallel.

    build/venv-torch2/bin/torchrun --standalone --nproc_per_node 4 \
        examples/train_transformer_ddp.py [--hook threelc|none|fp16|bf16|powersgd] \
        [--powersgd-rank R] [--model small|large] [--steps N] [--lr LR] [--seed K] \
        [--optimizer adamw|local-variance-adamw]

The DistributedDataParallel twin of train_transformer.py (threelc.torch's Horovod API): the
same GPT-2, text, global batches, AdamW, schedule and clipping (examples/text_lm.py), so the
two can be compared run for run. torch.distributed runs over gloo; with --hook threelc (the
default) one line hands DDP's gradient buckets to the threelc engine, 3LC-compressed with
error feedback:

    model.register_comm_hook(threelc.torch.DDPHookState(), threelc.torch.ddp_comm_hook)

The other hooks are DDP's default allreduce (none) and the compressors torch ships (fp16, bf16,
powersgd): examples/ddp_hooks.py. Clipping applies to the averaged gradients (after backward,
DDP has averaged them).

Rank 0 prints progress and the validation loss every --eval-every steps; the last line is one
JSON object with val_loss, perplexity and the run's settings. mb_sent_per_rank is every byte
this process's TCP sockets sent during the training steps (ss: examples/ddp_hooks.py; the
validations' few included), and compression_ratio = ring_mb_per_rank / mb_sent_per_rank, where
ring_mb_per_rank is what a ring allreduce of the float32 gradients sends per rank,
2 (N-1)/N x gradient bytes x steps.
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
import text_lm  # noqa: E402
from ddp_hooks import (SS, add_hook_arguments, average, check_hook_arguments,  # noqa: E402
                       describe_hook, engine_bytes_sent, note_without_ss, tcp_bytes_sent,
                       wrap)
from training import exit_without_teardown  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_hook_arguments(ap)
    text_lm.add_optimizer_argument(ap)
    text_lm.add_arguments(ap)
    args = text_lm.parse_arguments(ap, argv)
    check_hook_arguments(ap, args)
    if args.optimizer != "adamw" and args.hook != "threelc":
        ap.error(f"--optimizer {args.optimizer} needs --hook threelc (the hook divides the "
                 f"gradients)")
    return ap, args


def main(argv=None) -> int:
    ap, args = parse_args(argv)
    start = time.perf_counter()
    dist.init_process_group("gloo")  # env:// from torchrun
    rank, size = dist.get_rank(), dist.get_world_size()
    text_lm.check_ranks(ap, args, size)
    threads = text_lm.torch_threads(args, int(os.environ.get("LOCAL_WORLD_SIZE", size)))
    torch.manual_seed(args.seed)
    log = print if rank == 0 else (lambda *a, **k: None)
    if rank == 0:
        note_without_ss()
    corpus = text_lm.load_corpus(args.text_dir)
    net = text_lm.make_model(args.model)
    optimizer = text_lm.make_optimizer(net, args)
    threelc_options = {} if args.optimizer == "adamw" else {"preconditioner": optimizer}
    model = wrap(net, args, threelc_options)
    schedule = text_lm.lr_schedule(optimizer, args)

    params = sum(p.numel() for p in model.parameters())
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    log(f"DistributedDataParallel: GPT-2 {args.model} ({params} parameters), AdamW lr "
        f"{args.lr:g}, {size} ranks x {args.batch_size // size} windows of {text_lm.CONTEXT} "
        f"bytes, {args.steps} steps, {describe_hook(args, {})}, {args.optimizer}, {threads} torch "
        f"thread(s) per rank", flush=True)

    step_seconds = []

    def step(loss):
        began = time.perf_counter()
        loss.backward()
        if args.clip > 0 and args.optimizer == "adamw":  # LocalVarianceAdamW clips itself
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        step_seconds.append(time.perf_counter() - began)

    def validate():
        totals = text_lm.validation_totals(model.module, corpus, args, rank, size)
        dist.all_reduce(totals)
        loss, count = totals.tolist()
        return loss / count

    measured = SS is not None
    sent0, engine0 = tcp_bytes_sent(), engine_bytes_sent(args.hook)
    train_start = time.perf_counter()
    curve = text_lm.train(model, optimizer, schedule, corpus, args, rank, size, step,
                          validate, log)
    train_seconds = time.perf_counter() - train_start
    sent1, engine1 = tcp_bytes_sent(), engine_bytes_sent(args.hook)
    sent, engine_sent = average(
        [float(sent1 - sent0) if measured else 0.0, float(engine1 - engine0)], size)
    ring = 2 * (size - 1) / size * grad_bytes * args.steps
    timing = {"seconds": time.perf_counter() - start, "train_seconds": train_seconds,
              "median_step_seconds": float(np.median(step_seconds))}
    summary = {**text_lm.summary(args, curve, params, size, timing),
               "api": "ddp", "hook": args.hook,
               "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
               "bucket_cap_mb": args.bucket_cap_mb,
               "compression_ratio": round(ring / sent, 2) if measured and sent else None,
               "mb_sent_per_rank": round(sent / 1e6, 3) if measured else None,
               "ring_mb_per_rank": round(ring / 1e6, 3),
               "engine_mb_sent_per_rank": round(engine_sent / 1e6, 3)
               if args.hook == "threelc" else None,
               **(text_lm.threelc_codec_settings() if args.hook == "threelc" else {})}
    log(json.dumps(summary), flush=True)
    dist.barrier()
    exit_without_teardown()


if __name__ == "__main__":
    sys.exit(main())
