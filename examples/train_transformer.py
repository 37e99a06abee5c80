#!/usr/bin/env python3
"""Data-parallel training of a GPT-2 (Hugging Face transformers) with AdamW on threelc.torch.

    threelcrun -np 4 build/venv-torch2/bin/python examples/train_transformer.py \
        [--model small|large] [--compression threelc|fp16|none] [--steps N] [--lr LR] \
        [--seed K] [--optimizer adamw|local-variance-adamw]

A byte-level GPT-2 trained from scratch on the Python documentation's text
(examples/text_lm.py: the text, the two sizes, AdamW with warm-up and cosine decay, clipping
at a global norm of 1.0, a held-out validation split). Gradients are averaged over the ranks by
hvd.DistributedOptimizer, 3LC-compressed by the engine (error feedback kept per parameter),
unless --compression fp16 (Horovod's fp16) or none. Clipping applies to the averaged
gradients, as Horovod's documentation does it:

    loss.backward()
    optimizer.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with optimizer.skip_synchronize():
        optimizer.step()

Rank 0 prints progress and the validation loss every --eval-every steps; the last line is one
JSON object with val_loss, perplexity, the bytes each rank sent, the compression ratio (what an
uncompressed push_pull of the float32 gradients would have sent over what was sent: the
engine's statistics) and the run's settings. Needs transformers (build/venv-torch2 has it:
tools/torch2_venv.sh) and the Debian package python3-doc (tools/setup.sh --tests).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import threelc.torch as hvd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import text_lm  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compression", choices=("threelc", "fp16", "none"), default="threelc",
                    help="gradient compression: threelc (default), fp16 (Horovod's) or none")
    text_lm.add_optimizer_argument(ap)
    text_lm.add_arguments(ap)
    return ap, text_lm.parse_arguments(ap, argv)


def wire_bytes() -> tuple:
    s = hvd.statistics()
    return s.wire_bytes_sent, s.allreduce_bytes


def main(argv=None) -> int:
    ap, args = parse_args(argv)
    start = time.perf_counter()
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    text_lm.check_ranks(ap, args, size)
    threads = text_lm.torch_threads(args, hvd.local_size())
    torch.manual_seed(args.seed)
    corpus = text_lm.load_corpus(args.text_dir)
    model = text_lm.make_model(args.model)
    compression = {"threelc": hvd.Compression.threelc, "fp16": hvd.Compression.fp16,
                   "none": hvd.Compression.none}[args.compression]
    # The allreduces' inputs are float32 gradients, or float16 ones with fp16 (half the bytes).
    input_to_float32 = 2 if args.compression == "fp16" else 1
    optimizer = hvd.DistributedOptimizer(text_lm.make_optimizer(model, args),
                                         named_parameters=model.named_parameters(),
                                         compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    # No broadcast_optimizer_state: a fresh AdamW is the same on every rank, and Horovod's
    # broadcast first steps an optimizer without state on zero gradients, which with weight
    # decay moves the parameters (one resuming from rank 0's checkpoint would broadcast it).
    schedule = text_lm.lr_schedule(optimizer, args)

    log = print if rank == 0 else (lambda *a, **k: None)
    params = sum(p.numel() for p in model.parameters())
    log(f"threelc.torch: GPT-2 {args.model} ({params} parameters), AdamW lr {args.lr:g}, "
        f"{size} ranks x {args.batch_size // size} windows of {text_lm.CONTEXT} bytes, "
        f"{args.steps} steps, {args.compression}, {args.optimizer}, {threads} torch thread(s) per rank",
        flush=True)

    step_seconds = []

    def step(loss):
        began = time.perf_counter()
        loss.backward()
        optimizer.synchronize()
        if args.clip > 0 and args.optimizer == "adamw":  # LocalVarianceAdamW clips itself
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        with optimizer.skip_synchronize():
            optimizer.step()
        step_seconds.append(time.perf_counter() - began)

    def validate():
        loss, count = hvd.allreduce(
            text_lm.validation_totals(model, corpus, args, rank, size), op=hvd.Sum,
            name="validation.totals").tolist()
        return loss / count

    sent0, reduced0 = wire_bytes()
    train_start = time.perf_counter()
    curve = text_lm.train(model, optimizer, schedule, corpus, args, rank, size, step,
                          validate, log)
    train_seconds = time.perf_counter() - train_start
    sent1, reduced1 = wire_bytes()
    # Bytes each rank sent (the validations' few included), and what an uncompressed push_pull
    # of the float32 gradients would have sent.
    sent, raw = hvd.allreduce(torch.tensor(
        [float(sent1 - sent0), (reduced1 - reduced0) * input_to_float32 * 2 * (size - 1) / size],
        dtype=torch.float64), op=hvd.Average, name="traffic").tolist()
    timing = {"seconds": time.perf_counter() - start, "train_seconds": train_seconds,
              "median_step_seconds": float(np.median(step_seconds))}
    summary = {**text_lm.summary(args, curve, params, size, timing),
               "api": "DistributedOptimizer", "compression": args.compression,
               "compression_ratio": round(raw / sent, 2) if sent else None,
               "bytes_sent_per_rank": int(sent),
               **(text_lm.threelc_codec_settings() if args.compression == "threelc" else {})}
    log(json.dumps(summary), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
