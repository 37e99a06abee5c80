#!/usr/bin/env python3
"""A one-process model of the transformer examples' data-parallel AdamW training through
push_pull, for splitting 3LC's loss into its parts and trying fixes.

    build/venv-torch2/bin/python tools/eval/accuracy/transformer_fidelity.py --ranks 4 \
        --lr 1e-3 [--compression threelc|none] [--push 3lc|exact] [--pull 3lc|exact] \
        [--scale-values N] [--exact-tensors REGEX] [--exact-steps K] [--clip C] \
        [--precondition] [--seed K] [--model small|large]

It trains examples/text_lm.py's GPT-2 on the same text, global batches, AdamW, schedule and
clipping as examples/train_transformer.py, but simulates the ranks in one process: each step
computes every rank's gradient on its windows, then combines them as push_pull does
(tools/eval/accuracy/fidelity_model.py's PushPull: the codec's quantizer, a scale per
--scale-values values, push and pull residuals per rank; the tensors of fewer than
--min-compress-values values averaged exactly, as the engine sends tensors under
THREELC_MIN_COMPRESS_BYTES raw). The averaged gradients are then clipped and AdamW steps.

Knobs that take one part away or change it:
  --push exact / --pull exact   that quantization is skipped;
  --scale-values N              values per 3LC scale (the engine's THREELC_SCALE_TILE; 0: one
                                scale a block, the paper's);
  --exact-tensors REGEX         parameters whose name matches are averaged exactly;
  --exact-steps K               the first K steps are averaged exactly (an uncompressed start);
  --clip C                      the global-norm clip (0: none);
  --precondition                3LC in Adam's coordinates: every gradient is divided by the
                                root of a running mean of the squared averaged gradients that
                                every rank holds alike before it is quantized, and multiplied
                                by it after (threelc.torch's THREELC_ADAM_PRECONDITION).

The last line is one JSON object: the validation loss, the bits per value and ratio of the
compressed tensors, push and pull densities, the relative error of the combined gradient, how
long values wait in the push residuals, how often clipping cut the gradient (and by how much,
against the exact average's norm), and what AdamW's second moment saw: the mean over the
compressed values of exp_avg_sq over the same moment of the exact averages (1 is what
uncompressed training sees).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import text_lm  # noqa: E402
from fidelity_model import PushPull  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    text_lm.add_arguments(ap)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--compression", choices=("threelc", "none"), default="threelc")
    ap.add_argument("--push", choices=("3lc", "exact"), default="3lc")
    ap.add_argument("--pull", choices=("3lc", "exact"), default="3lc")
    ap.add_argument("--sparsity", type=float, default=1.0)
    ap.add_argument("--scale-values", type=int, default=320)
    ap.add_argument("--min-compress-values", type=int, default=256)
    ap.add_argument("--exact-tensors", default="", help="regex of parameter names sent exact")
    ap.add_argument("--exact-steps", type=int, default=0)
    ap.add_argument("--smooth", type=float, default=0.0,
                    help="hand the optimizer an exponential mean of the averaged 3LC results "
                         "with this coefficient (sum-preserving: (1 - a) sum a^k d[t-k]); 0: "
                         "the results themselves")
    ap.add_argument("--local-adam", action="store_true",
                    help="Adam's second moment on each rank from its own gradients: every rank "
                         "clips its gradient, divides it by the root of its own running mean "
                         "of squares, and push_pull averages those; the first moment, weight "
                         "decay and step are AdamW's on that average")
    ap.add_argument("--local-precondition", action="store_true",
                    help="every rank divides its gradient by the root of its own running mean "
                         "of squares before push_pull; clipping and AdamW then run as usual on "
                         "the average of those")
    ap.add_argument("--local-v-scale", type=float, default=1.0,
                    help="--local-adam divides by sqrt(second moment / this)")
    ap.add_argument("--precondition", action="store_true")
    ap.add_argument("--precondition-floor", type=float, default=0.1)
    ap.add_argument("--precondition-start", type=int, default=10)
    ap.add_argument("--precondition-rescale", action="store_true",
                    help="keep the residuals in the gradients' units (rescaled when the "
                         "divisor changes), where the engine keeps them in the divided units")
    args = text_lm.parse_arguments(ap, argv)
    # what PushPull reads
    args.pull_sparsity = args.sparsity
    args.pull_scale_values = args.scale_values
    args.small_scale_values = 0
    args.small_tensor_values = 0
    args.magnitude = "max"
    args.density = 0.0
    return args


class Preconditioner:
    """The per-value divisor of --precondition: sqrt of an exponential mean (beta2 of AdamW)
    of the squared averaged gradients, bias-corrected, floored per tensor at
    --precondition-floor times the tensor's mean root, so that a value never seen non-zero
    does not take a tile's whole scale. Before --precondition-start steps the divisor is 1."""

    def __init__(self, sizes, args, beta: float = 0.95):
        self.beta = beta
        self.sizes = sizes
        self.floor = args.precondition_floor
        self.start = args.precondition_start
        self.second = torch.zeros(sum(sizes))
        self.steps = 0

    def divisor(self) -> torch.Tensor:
        if self.steps < max(1, self.start):
            return torch.ones_like(self.second)
        root = (self.second / (1 - self.beta ** self.steps)).sqrt()
        parts = []
        for part in root.split(self.sizes):
            parts.append(part.clamp_min(self.floor * float(part.mean()) + 1e-30))
        return torch.cat(parts)

    def update(self, averaged: torch.Tensor) -> None:
        self.second.mul_(self.beta).addcmul_(averaged, averaged, value=1 - self.beta)
        self.steps += 1


class LocalAdam:
    """--local-adam: every rank's own second moment, a shared first moment."""

    def __init__(self, params, ranks, args):
        self.params = [p for _, p in params]
        self.args = args
        self.second = [[torch.zeros_like(p) for p in self.params] for _ in range(ranks)]
        self.first = [torch.zeros_like(p) for p in self.params]

    def precondition(self, rank, grads, step):
        a = self.args
        if a.clip > 0 and a.local_adam:
            norm = float(torch.cat([g.flatten() for g in grads]).norm())
            if norm > a.clip:
                grads = [g * (a.clip / norm) for g in grads]
        out = []
        for g, v in zip(grads, self.second[rank]):
            v.mul_(0.95).addcmul_(g, g, value=0.05)
            root = (v * a.local_v_scale / (1 - 0.95 ** (step + 1))).sqrt()
            out.append(g / (root + 1e-8))
        return out

    def step(self, averaged, step):
        a = self.args
        lr = a.lr * text_lm.lr_factor(step, a)
        with torch.no_grad():
            for p, u, m in zip(self.params, averaged, self.first):
                m.mul_(0.9).add_(u, alpha=0.1)
                if p.dim() >= 2:
                    p.mul_(1 - lr * a.weight_decay)
                p.sub_(m / (1 - 0.9 ** (step + 1)), alpha=lr)


def describe(run: dict) -> str:
    """What a configuration changes against uncompressed AdamW."""
    parts = []
    if run.get("local_adam"):
        parts.append("LocalVarianceAdamW" + (f" (v x {run['local_v_scale']:g})"
                                             if run.get("local_v_scale", 1.0) != 1.0 else ""))
    if run.get("local_precondition"):
        parts.append("each rank's gradient divided by its own RMS, then AdamW")
    if run["compression"] == "none":
        return ", ".join(["uncompressed"] + parts + (["no clipping"] if not run["clip"] else []))
    parts.insert(0, "3LC" + (f", a scale per {run['scale_values']} values"
                             if run["scale_values"] != 320 else ""))
    for side in ("push", "pull"):
        if run[side] == "exact":
            parts.append(f"{side} exact")
    if run.get("exact_tensors"):
        parts.append(f"{run['exact_tensors']} exact")
    if run.get("exact_steps"):
        parts.append(f"first {run['exact_steps']} steps exact")
    if not run["clip"]:
        parts.append("no clipping")
    if run.get("smooth"):
        parts.append(f"results smoothed ({run['smooth']:g})")
    if run.get("precondition"):
        parts.append("divided by the averaged RMS" + (", residuals rescaled"
                                                      if run.get("precondition_rescale") else ""))
    return ", ".join(parts)


def table(paths) -> str:
    """The Markdown table of docs/ACCURACY.md from runs' JSON lines: one row per
    configuration and learning rate, against the best uncompressed AdamW mean (clipped)."""
    groups = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            run = json.loads(line)
            groups.setdefault((run["model"], run["ranks"], describe(run), run["lr"]),
                              []).append(run)
    best = min(statistics.mean(r["val_loss"] for r in runs)
               for (_, _, what, _), runs in groups.items() if what == "uncompressed")
    rows = ["| configuration | lr | seeds | validation loss | per seed | vs best AdamW | "
            "ratio | push / pull density | clipped norm / exact | AdamW's v / exact |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for (_, _, what, lr), runs in sorted(groups.items(), key=lambda kv: (
            kv[0][2] != "uncompressed", kv[0][2], kv[0][3])):
        runs.sort(key=lambda r: r["seed"])
        mean = statistics.mean(r["val_loss"] for r in runs)
        first = runs[0]

        def avg(field, fmt):
            values = [r[field] for r in runs if r.get(field) is not None]
            return fmt.format(statistics.mean(values)) if values else ""
        density = (f"{avg('push_density', '{:.3f}')} / {avg('pull_density', '{:.3f}')}"
                   if "push_density" in first or "pull_density" in first else "")
        per_seed = ", ".join(f"{r['val_loss']:.4f}" for r in runs)
        rows.append(f"| {what} | {lr:g} | {len(runs)} | {mean:.4f} | {per_seed} | "
                    f"{100 * (mean / best - 1):+.1f} % | {avg('compression_ratio', '{:.1f}x')} | "
                    f"{density} | {avg('clip_norm_over_exact', '{:.2f}')} | "
                    f"{avg('second_moment_over_exact', '{:.2f}')} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    if argv[:1] == ["--table"]:
        print(table(argv[1:]))
        return 0
    args = parse_args(argv)
    torch.set_num_threads(args.threads or 2)
    n = args.ranks
    if args.batch_size % n:
        raise SystemExit(f"--batch-size {args.batch_size} is not a multiple of {n} ranks")
    torch.manual_seed(args.seed)
    corpus = text_lm.load_corpus(args.text_dir)
    model = text_lm.make_model(args.model)
    params = list(model.named_parameters())
    pattern = re.compile(args.exact_tensors) if args.exact_tensors else None
    compressed = [i for i, (name, p) in enumerate(params)
                  if args.compression == "threelc" and p.numel() >= args.min_compress_values
                  and not (pattern and pattern.search(name))]
    compressed.reverse()  # backward produces the last layers' gradients first
    sizes = [params[i][1].numel() for i in compressed]
    optimizer = text_lm.make_optimizer(model, args)
    schedule = text_lm.lr_schedule(optimizer, args)
    pp = PushPull(sizes, n, args) if compressed else None
    pre = Preconditioner(sizes, args) if args.precondition and compressed else None
    exact_second = torch.zeros(sum(sizes))  # AdamW's second moment of the exact averages
    clipped, clip_ratio_sum = 0, 0.0
    last_divisor = None
    local = LocalAdam(params, n, args) if args.local_adam or args.local_precondition else None
    smoothed = None
    curve = []
    start = time.perf_counter()

    def validate():
        totals = text_lm.validation_totals(model, corpus, args, 0, 1)
        return float(totals[0] / totals[1])

    for step in range(args.steps):
        per_rank = []
        loss_sum = 0.0
        for r in range(n):
            inputs, targets = text_lm.batch(corpus, args, step, r, n)
            model.zero_grad()
            loss = text_lm.step_loss(model, inputs, targets)
            loss.backward()
            loss_sum += loss.item() / n
            per_rank.append([p.grad.detach().clone() for _, p in params])
        if args.local_adam or args.local_precondition:
            per_rank = [local.precondition(r, grads, step) for r, grads in enumerate(per_rank)]
        averaged = [torch.stack([g[i] for g in per_rank]).mean(0) for i in range(len(params))]
        exact_norm = float(torch.cat([a.flatten() for a in averaged]).norm())
        if pp is not None:
            fused = torch.stack([torch.cat([g[i].flatten() for i in compressed])
                                 for g in per_rank])
            exact = fused.mean(0)
            exact_second.mul_(0.95).addcmul_(exact, exact, value=0.05)
            if step >= args.exact_steps:
                divisor = pre.divisor() if pre is not None else None
                if divisor is not None:
                    fused = fused / divisor
                    if args.precondition_rescale:
                        if last_divisor is not None:
                            pp.push_error.mul_(last_divisor / divisor)
                            pp.pull_error.mul_(last_divisor / divisor)
                        last_divisor = divisor
                result = pp.sum(fused) / n
                if divisor is not None:
                    result = result * divisor
            else:
                result = exact
            if pre is not None:
                pre.update(result)
            if args.smooth > 0 and step >= args.exact_steps:
                smoothed = (torch.zeros_like(result) if smoothed is None else
                            smoothed.mul(args.smooth)).add(result, alpha=1 - args.smooth)
                result = smoothed
            offset = 0
            for i in compressed:
                size = params[i][1].numel()
                averaged[i] = result[offset:offset + size].view_as(params[i][1])
                offset += size
        for (_, p), g in zip(params, averaged):
            p.grad = g
        if args.local_adam:
            local.step(averaged, step)
        elif args.clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip))
            if norm > args.clip:
                clipped += 1
            clip_ratio_sum += norm / max(exact_norm, 1e-30)
        if not args.local_adam:
            optimizer.step()
            schedule.step()
        if not math.isfinite(loss_sum):
            raise SystemExit(f"loss is {loss_sum} at step {step + 1}: training diverged")
        done = step + 1
        if done % args.log_every == 0:
            print(f"  step {done} loss {loss_sum:.4f} ({time.perf_counter() - start:.0f} s)",
                  flush=True)
        if done % args.eval_every == 0 or done == args.steps:
            val = validate()
            curve.append({"step": done, "val_loss": round(val, 5)})
            print(f"step {done}: validation loss {val:.4f}", flush=True)

    summary = {"val_loss": curve[-1]["val_loss"], "model": args.model, "ranks": n,
               "lr": args.lr, "steps": args.steps, "seed": args.seed,
               "compression": args.compression, "push": args.push, "pull": args.pull,
               "scale_values": args.scale_values, "min_compress_values": args.min_compress_values,
               "exact_tensors": args.exact_tensors, "exact_steps": args.exact_steps,
               "clip": args.clip, "smooth": args.smooth, "local_adam": args.local_adam,
               "local_precondition": args.local_precondition,
               "local_v_scale": args.local_v_scale if local else None, "precondition": args.precondition,
               "precondition_floor": args.precondition_floor if args.precondition else None,
               "precondition_start": args.precondition_start if args.precondition else None,
               "precondition_rescale": args.precondition_rescale,
               "clipped_steps": clipped,
               "clip_norm_over_exact": round(clip_ratio_sum / args.steps, 3)
               if args.clip and not args.local_adam else None,
               "curve": curve, "seconds": round(time.perf_counter() - start, 1)}
    if pp is not None:
        summary.update(pp.summary())
    if pp is not None and not args.local_adam:
        # what AdamW's second moment holds for the compressed values, over the exact one's
        seen = torch.cat([optimizer.state[params[i][1]]["exp_avg_sq"].flatten()
                          for i in compressed])
        summary["second_moment_over_exact"] = round(float(
            (seen / exact_second.clamp_min(1e-30)).median()), 3)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
