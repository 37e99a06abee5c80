"""What the transformer examples share: the text, the model, the optimizer and its schedule,
the batches and the validation loss.

- Text: the Python documentation's reStructuredText sources as Debian ships them
  (``python3-doc``: /usr/share/doc/python3/html/_sources, about 11 MB of English prose and
  code in 497 files on Debian 12), read as bytes: a byte-level vocabulary of 256. Every 10th
  file (in sorted order) is held out as the validation text; the others are the training text.
- Model: Hugging Face transformers' ``GPT2LMHeadModel`` trained from scratch, in two sizes:
  ``small`` (4 layers of 192, 4 heads: 1.85 M parameters) and ``large`` (6 layers of 384,
  6 heads: 10.8 M parameters, 43 MB of float32 gradients a step). Context 128 bytes, no
  dropout, the input embedding tied to the output layer (GPT-2's own).
- Optimizer: AdamW (betas 0.9 / 0.95, weight decay 0.1 on the matrices and embeddings, none on
  biases and layer norms, as GPT-2 and nanoGPT train), the learning rate rising linearly over
  the first ``--warmup`` steps (default a tenth) and then decaying along a cosine to a tenth
  of its peak; gradients clipped to a global norm of ``--clip`` (1.0) before each step.
- Batches: step t's global batch is ``--batch-size`` windows of 129 bytes (input and shifted
  target) at offsets drawn from a generator seeded by (seed, t); rank r of N trains on windows
  r, r + N, ... of it. So every rank count and both APIs train on the same global batches
  (16 windows a step by default: 4 ranks x 4, 8 ranks x 2).
- Validation: mean cross-entropy (nats per byte) over ``--val-windows`` fixed windows of the
  held-out text, split among the ranks and summed; perplexity is its exp.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import Callable, List, NamedTuple

import numpy as np
import torch

TEXT_DIR = Path("/usr/share/doc/python3/html/_sources")
INSTALL_HINT = "install the Debian package python3-doc (tools/setup.sh --tests does)"
CONTEXT = 128
VOCAB = 256
SIZES = {"small": dict(n_layer=4, n_embd=192, n_head=4),
         "large": dict(n_layer=6, n_embd=384, n_head=6)}
# Each size's best learning rate for uncompressed AdamW (the sweep in docs/ACCURACY.md): the
# examples' default --lr.
BEST_LR = {"small": 3e-3, "large": 1.5e-3}
VALIDATION_EVERY_NTH_FILE = 10
BETAS = (0.9, 0.95)


class Corpus(NamedTuple):
    train: torch.Tensor       # uint8 bytes of the training files, concatenated
    validation: torch.Tensor  # uint8 bytes of the held-out files


def load_corpus(text_dir: Path = TEXT_DIR) -> Corpus:
    """The training and validation text (every VALIDATION_EVERY_NTH_FILE-th file held out)."""
    files = sorted(p for p in Path(text_dir).rglob("*.txt") if p.is_file())
    if not files:
        raise FileNotFoundError(f"no *.txt under {text_dir}: {INSTALL_HINT}")
    parts: List[List[bytes]] = [[], []]
    for i, path in enumerate(files):
        parts[i % VALIDATION_EVERY_NTH_FILE == 0].append(path.read_bytes())
    train, validation = (torch.from_numpy(np.frombuffer(b"\n".join(p), np.uint8).copy())
                         for p in parts)
    if len(validation) < 4 * (CONTEXT + 1):
        raise ValueError(f"{text_dir}: the held-out files hold only {len(validation)} bytes")
    return Corpus(train, validation)


def make_model(size: str) -> torch.nn.Module:
    """GPT2LMHeadModel of `size` ("small" or "large"), initialized by transformers from the
    current torch seed."""
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}: one of {', '.join(SIZES)}")
    from transformers import GPT2Config, GPT2LMHeadModel  # noqa: PLC0415 (slow to import)
    from transformers.utils import logging  # noqa: PLC0415

    logging.set_verbosity_error()
    config = GPT2Config(vocab_size=VOCAB, n_positions=CONTEXT, bos_token_id=0, eos_token_id=0,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **SIZES[size])
    return GPT2LMHeadModel(config)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", choices=tuple(SIZES), default="small",
                    help="small (1.85 M parameters, default) or large (10.8 M: "
                         "communication-bound at 1 Gbit/s)")
    ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    ap.add_argument("--batch-size", type=int, default=16,
                    help="global batch in windows of 128 bytes, split among the ranks "
                         "(default 16)")
    ap.add_argument("--lr", type=float, default=None,
                    help="peak AdamW learning rate (default: uncompressed training's best for "
                         "the size in docs/ACCURACY.md, "
                         + ", ".join(f"{m} {lr:g}" for m, lr in BEST_LR.items()) + ")")
    ap.add_argument("--warmup", type=int, default=None,
                    help="steps of linear warm-up (default: a tenth of --steps)")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0,
                    help="clip the averaged gradients to this global norm (0: no clipping)")
    ap.add_argument("--seed", type=int, default=0, help="model and batch seed")
    ap.add_argument("--val-windows", type=int, default=256,
                    help="validation windows of 128 bytes (default 256)")
    ap.add_argument("--eval-every", type=int, default=100,
                    help="validation loss every N steps, and at the end (default 100)")
    ap.add_argument("--log-every", type=int, default=25, help="progress line every N steps")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads per rank (default: cores / ranks on this host)")
    ap.add_argument("--text-dir", type=Path, default=TEXT_DIR)


def parse_arguments(ap: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """Parses and checks; --lr and --warmup get their defaults."""
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    if args.lr is None:
        args.lr = BEST_LR[args.model]
    elif not args.lr > 0:
        ap.error(f"--lr {args.lr} must be positive")
    if args.warmup is None:
        args.warmup = args.steps // 10
    if not 0 <= args.warmup < args.steps:
        ap.error(f"--warmup {args.warmup} must be in [0, --steps)")
    if args.clip < 0:
        ap.error(f"--clip {args.clip} must be >= 0")
    if args.batch_size < 1 or args.val_windows < 1:
        ap.error("--batch-size and --val-windows must be at least 1")
    if args.eval_every < 1 or args.log_every < 1:
        ap.error("--eval-every and --log-every must be at least 1")
    return args


def check_ranks(ap: argparse.ArgumentParser, args, size: int) -> None:
    if args.batch_size % size:
        ap.error(f"--batch-size {args.batch_size} is not a multiple of the {size} ranks")


def torch_threads(args, ranks_on_this_host: int) -> int:
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, ranks_on_this_host))
    torch.set_num_threads(threads)
    return threads


def parameter_groups(model: torch.nn.Module, args) -> list:
    """Weight decay on the tensors of 2+ dimensions only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def add_optimizer_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--optimizer", choices=("adamw", "local-variance-adamw"), default="adamw",
                    help="adamw (torch's, default) or local-variance-adamw "
                         "(threelc.torch.LocalVarianceAdamW: each rank divides its gradient "
                         "by its own second moment before the allreduce; --clip then clips "
                         "each rank's gradient)")


def make_optimizer(model: torch.nn.Module, args) -> torch.optim.Optimizer:
    """--optimizer: torch's AdamW, or threelc.torch.LocalVarianceAdamW (clipping each rank's
    gradient to --clip)."""
    groups = parameter_groups(model, args)
    if getattr(args, "optimizer", "adamw") == "adamw":
        return torch.optim.AdamW(groups, lr=args.lr, betas=BETAS, eps=1e-8)
    import threelc.torch  # noqa: PLC0415 (torch's AdamW runs without the threelc library)

    return threelc.torch.LocalVarianceAdamW(groups, lr=args.lr, betas=BETAS, eps=1e-8,
                                            max_grad_norm=args.clip or None)


def lr_factor(step: int, args) -> float:
    """The learning rate of step `step` (0-based) over the peak: linear warm-up, then a
    cosine down to 0.1."""
    if step < args.warmup:
        return (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * progress))


def lr_schedule(optimizer, args):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, args))


def batch(corpus: Corpus, args, step: int, rank: int, size: int):
    """(inputs, targets) of `rank` at `step`: its windows of the step's global batch."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    starts = torch.randint(0, len(corpus.train) - CONTEXT - 1, (args.batch_size,), generator=g)
    mine = starts[rank::size]
    windows = torch.stack([corpus.train[s: s + CONTEXT + 1] for s in mine.tolist()]).long()
    return windows[:, :-1], windows[:, 1:]


def step_loss(model, inputs, targets) -> torch.Tensor:
    logits = model(input_ids=inputs).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def validation_starts(corpus: Corpus, windows: int) -> List[int]:
    """`windows` evenly spaced offsets over the held-out text (the same in every run)."""
    last = len(corpus.validation) - CONTEXT - 1
    return [int(i * last / max(1, windows - 1)) for i in range(windows)]


def validation_totals(model, corpus: Corpus, args, rank: int, size: int,
                      batch_windows: int = 32) -> torch.Tensor:
    """[summed loss over this rank's validation tokens, their count] (float64); sum it over
    the ranks."""
    starts = validation_starts(corpus, args.val_windows)[rank::size]
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(starts), batch_windows):
            windows = torch.stack([corpus.validation[s: s + CONTEXT + 1]
                                   for s in starts[i: i + batch_windows]]).long()
            total += float(step_loss(model, windows[:, :-1], windows[:, 1:])) \
                * windows[:, 1:].numel()
    model.train()
    return torch.tensor([total, float(len(starts) * CONTEXT)], dtype=torch.float64)


def train(model, optimizer, schedule, corpus: Corpus, args, rank: int, size: int,
          step_fn: Callable, validate: Callable, log: Callable) -> List[dict]:
    """The training loop both APIs share: `step_fn(loss)` runs backward, averaging, clipping
    and the optimizer step; `validate()` returns the validation loss (the same on every rank).
    Returns the validation curve [{"step", "val_loss", "seconds"}], seconds being the training
    time so far (validations left out). Raises SystemExit naming the step where the loss stops
    being finite."""
    curve = []
    loss_sum, since = 0.0, 0
    trained = 0.0
    for step in range(args.steps):
        began = time.perf_counter()
        inputs, targets = batch(corpus, args, step, rank, size)
        optimizer.zero_grad()
        loss = step_loss(model, inputs, targets)
        step_fn(loss)
        schedule.step()
        value = loss.item()
        if not math.isfinite(value):
            raise SystemExit(f"rank {rank}: loss is {value} at step {step + 1}: training "
                             f"diverged")
        trained += time.perf_counter() - began
        loss_sum, since = loss_sum + value, since + 1
        done = step + 1
        if done % args.log_every == 0:
            log(f"  step {done}/{args.steps} loss {loss_sum / since:.4f} lr "
                f"{schedule.get_last_lr()[0]:.2e}", flush=True)
            loss_sum, since = 0.0, 0
        if done % args.eval_every == 0 or done == args.steps:
            val = validate()
            curve.append({"step": done, "val_loss": round(val, 5), "seconds": round(trained, 2)})
            log(f"step {done}: validation loss {val:.4f} (perplexity {math.exp(val):.3f}), "
                f"{trained:.1f} s of training", flush=True)
    return curve


def threelc_codec_settings() -> dict:
    """The 3LC settings a run's bytes and loss depend on (THREELC_SPARSITY, THREELC_SCALE_TILE),
    for the JSON line of a run that compresses with 3LC."""
    from threelc.settings import value  # noqa: PLC0415 (only where threelc compresses)

    return {"sparsity": float(value("THREELC_SPARSITY")),
            "scale_tile": int(value("THREELC_SCALE_TILE"))}


def summary(args, curve: List[dict], parameters: int, size: int, timing: dict) -> dict:
    """The fields of the examples' JSON line that both APIs share; `timing` holds seconds,
    train_seconds and median_step_seconds."""
    val = curve[-1]["val_loss"]
    return {"val_loss": val, "perplexity": round(math.exp(val), 4), "model": args.model,
            "parameters": parameters, "optimizer": args.optimizer, "ranks": size,
            "steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
            "warmup": args.warmup, "clip": args.clip, "seed": args.seed, "curve": curve,
            **{k: round(v, 5 if k == "median_step_seconds" else 2) for k, v in timing.items()}}
