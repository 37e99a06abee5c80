#!/usr/bin/python3
"""The transformer examples' results (JSON lines of examples/train_transformer*.py): the table of
docs/ACCURACY.md, "Through the engine", and the validation loss against the bytes sent.

    tools/eval/accuracy/transformer_results.py docs/accuracy/transformer.jsonl \\
        [--plot docs/accuracy/transformer_loss_vs_bytes.png]

One row per configuration (API, model, ranks, gradients, optimizer, learning rate), its seeds'
mean validation loss, against the mean of uncompressed AdamW at the same model and learning
rate (the runs of both APIs and every rank count pooled: they train on the same global batches
and agree to 4-5 digits), with the standard error of that difference; the ratio is each example's own (bytes an fp32 ring or uncompressed
push_pull would send, over the bytes sent). The plot (matplotlib: /usr/bin/python3) puts every
configuration's mean at its bytes per value against the loss, one panel per model and ranks.
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path


def gradients(run: dict) -> str:
    """What the run's gradients went through, in the table's words."""
    if run["api"] == "ddp":
        method = {"none": "uncompressed", "threelc": "3LC hook", "fp16": "torch's fp16 hook",
                  "bf16": "torch's bf16 hook"}.get(run["hook"])
        if run["hook"] == "powersgd":
            method = f"torch's PowerSGD hook, rank {run['powersgd_rank']}"
    else:
        method = {"none": "uncompressed", "threelc": "3LC",
                  "fp16": "Horovod's fp16"}[run["compression"]]
    if "scale_tile" in run:
        changed = [f"a scale per {run['scale_tile']} values"] if run["scale_tile"] != 320 else []
        changed += [f"s = {run['sparsity']:g}"] if run["sparsity"] != 1.0 else []
        method += f" ({', '.join(changed)})" if changed else " (defaults)"
    if run.get("clip") not in (None, 1.0):
        method += f", clip {run['clip']:g}"
    return method


def optimizer(run: dict) -> str:
    return {"adamw": "AdamW", "local-variance-adamw": "LocalVarianceAdamW"}[run["optimizer"]]


def uncompressed_adamw(run: dict) -> bool:
    return (run["optimizer"] == "adamw" and run.get("clip", 1.0) == 1.0
            and run.get("hook", run.get("compression")) == "none")


def load(paths) -> list:
    runs = []
    for path in paths:
        runs += [json.loads(line) for line in Path(path).read_text().splitlines()
                 if line.startswith("{")]
    return runs


def standard_error(values) -> float:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0


def rows(runs: list) -> list:
    """[(key, runs, reference runs)] with key (model, ranks, api, gradients, optimizer, lr)."""
    groups, references = {}, {}
    for run in runs:
        key = (run["model"], run["ranks"], run["api"], gradients(run), optimizer(run), run["lr"])
        groups.setdefault(key, []).append(run)
        if uncompressed_adamw(run):
            references.setdefault((run["model"], run["lr"]), []).append(run)
    return [(key, sorted(group, key=lambda r: r["seed"]),
             references.get((key[0], key[5]), []))
            for key, group in sorted(groups.items(), key=lambda kv: (
                kv[0][0], kv[0][1], kv[0][5], not uncompressed_adamw(kv[1][0]), kv[0][2],
                kv[0][3], kv[0][4]))]


def ratio_text(group: list) -> str:
    ratios = sorted(r["compression_ratio"] for r in group if r.get("compression_ratio"))
    if not ratios:
        return ""
    return (f"{ratios[0]:.1f}x" if ratios[-1] - ratios[0] < 0.05
            else f"{ratios[0]:.1f}-{ratios[-1]:.1f}x")


def table(runs: list) -> str:
    out = ["| model | ranks | lr | API | gradients | optimizer | seeds | validation loss | "
           "per seed | vs uncompressed AdamW | standard error | ratio |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, ranks, api, grads, opt, lr), group, reference in rows(runs):
        losses = [r["val_loss"] for r in group]
        mean = statistics.mean(losses)
        gap = error = ""
        if reference and not (uncompressed_adamw(group[0])):
            base = [r["val_loss"] for r in reference]
            base_mean = statistics.mean(base)
            gap = f"{100 * (mean / base_mean - 1):+.1f} %"
            error = (f"{100 * math.hypot(standard_error(losses), standard_error(base)) / base_mean:.1f} %"
                     if len(losses) > 1 and len(base) > 1 else "")
        api_name = "DDP" if api == "ddp" else "DistributedOptimizer"
        out.append(f"| {model} | {ranks} | {lr:g} | {api_name} | {grads} | {opt} | {len(group)} "
                   f"| {mean:.4f} | {', '.join(f'{x:.4f}' for x in losses)} | {gap} | {error} "
                   f"| {ratio_text(group)} |")
    return "\n".join(out)


def plot(runs: list, path: Path) -> None:
    import matplotlib  # noqa: PLC0415 (only for --plot)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    panels = sorted({(r["model"], r["ranks"], r["lr"]) for r in runs})
    fig, axes = plt.subplots(1, len(panels), figsize=(6.8 * len(panels), 5.2), squeeze=False)
    for ax, (model, ranks, lr) in zip(axes[0], panels):
        for (m, n, api, grads, opt, l), group, _ in rows(runs):
            if (m, n, l) != (model, ranks, lr):
                continue
            ratios = [r["compression_ratio"] for r in group if r.get("compression_ratio")]
            if not ratios:
                continue
            bits = 32 / statistics.mean(ratios)
            loss = statistics.mean(r["val_loss"] for r in group)
            error = standard_error([r["val_loss"] for r in group])
            label = f"{'DDP' if api == 'ddp' else 'DistOpt'} {grads}, {opt} ({len(group)})"
            ax.errorbar([bits], [loss], yerr=[error] if error else None, marker="o",
                        linestyle="none", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("bits sent per gradient value (32: an fp32 ring)")
        ax.set_ylabel("validation loss after the last step")
        ax.set_title(f"GPT-2 {model}, {ranks} ranks, lr {lr:g} (seeds in brackets)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="JSON-lines files of the examples")
    ap.add_argument("--plot", type=Path, help="write the loss-against-bytes figure here")
    args = ap.parse_args(argv)
    runs = load(args.results)
    print(table(runs))
    if args.plot:
        plot(runs, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
