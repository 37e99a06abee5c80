#!/usr/bin/env python3
"""Prints the tables of docs/ACCURACY.md from the JSON lines that
tools/eval/accuracy/run_matrix.sh wrote.

    /usr/bin/python3 tools/eval/accuracy/summarize.py accuracy_results.jsonl [more.jsonl ...]

One row per configuration (ranks, epochs, learning rate, allreduce algorithm, compression,
sparsity, engine settings such as THREELC_SCALE_TILE): the seeds run, mean test accuracy (and per seed), its difference
from the uncompressed runs with the same ranks, epochs and learning rate, in percentage points, with its standard
error (from the seeds' spread on both sides), the mean compression ratio, and the runs that failed
(diverged) with their first error line. Several results files may be given. When the runs' logs are next to a results file
(RESULTS.logs/, as run_matrix.sh keeps them), it also counts the engine's error-feedback
warnings (runaway and non-finite gradient lines) per configuration.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from run_log import RunLog, log_name, short_log_name

WARNING = re.compile(r"running away|NaN or Inf")


def key(run: dict) -> tuple:
    """(model, ranks, epochs, lr, algorithm, compression, sparsity, settings). Runs of the DDP
    example (they carry "hook") are algorithm "ddp", compression their hook ("threelc" with the
    3LC hook, "powersgd r2" with PowerSGD of rank 2)."""
    if "hook" in run:
        algorithm, compression = "ddp", run["hook"]
        if compression == "powersgd":
            compression += f" r{run.get('powersgd_rank')}"
    else:
        algorithm, compression = run.get("algorithm", "push_pull"), run["compression"]
    sparsity = run.get("sparsity") if compression == "threelc" else None
    return (run.get("model", "cnn"), int(run["ranks"]), int(run.get("epochs", 2)),
            float(run.get("lr", 0.02)), algorithm, compression,
            None if sparsity is None else float(sparsity), run.get("settings") or "")


def baseline_key(k: tuple) -> tuple:
    """What a configuration is compared with: the uncompressed runs of the same model, ranks,
    epochs and learning rate, through DDP for the DDP example, through the engine otherwise."""
    return k[:4] + (k[4] == "ddp",)


def label(k: tuple) -> str:
    model, ranks, epochs, lr, algorithm, compression, sparsity, settings = k
    what = f"3LC s={sparsity:g}" if compression == "threelc" else compression
    if settings:
        what += f", `{settings}`"
    return f"| {model} | {ranks} | {epochs} | {lr:g} | {algorithm} | {what} "


def run_log(run: dict) -> RunLog:
    """The run as run_matrix.sh named its log, from its JSON line."""
    model, ranks, _, _, algorithm, compression, _, settings = key(run)
    sparsity = run.get("sparsity")
    return RunLog(model=model, ranks=str(ranks), algorithm=algorithm,
                  method=run.get("hook") or compression,
                  sparsity=str(sparsity if sparsity is not None else "1.0"), settings=settings,
                  hook_args=run.get("hook_args") or "",  # the DDP example's, run_matrix.sh's
                  lr=str(run.get("lr")), epochs=str(run.get("epochs")), seed=str(run["seed"]))


def warnings_in(run: dict) -> int:
    logs = run["_logs"]
    if not logs.is_dir():
        return 0
    name = run_log(run)
    path = logs / log_name(name)
    if not path.exists():
        path = logs / short_log_name(name)
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text(errors="replace").splitlines()
               if WARNING.search(line))


def standard_error(runs: list, baseline: list | None) -> float | None:
    """The standard error, in pp, of the difference between the mean accuracies of `runs` and
    of `baseline` (independent samples: sqrt(var_a / n_a + var_b / n_b)); None with fewer than
    two of either."""
    if not baseline or len(runs) < 2 or len(baseline) < 2:
        return None
    return 100 * (statistics.variance(runs) / len(runs) +
                  statistics.variance(baseline) / len(baseline)) ** 0.5


def main(argv) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    groups = defaultdict(list)
    for name in argv[1:]:
        path = Path(name)
        for line in path.read_text().splitlines():
            if line.strip():
                run = json.loads(line)
                run["_logs"] = path.with_suffix(".logs")
                groups[key(run)].append(run)
    baseline = {}
    for k, runs in groups.items():
        ok = [r["test_accuracy"] for r in runs if not r.get("failed")]
        if k[5] == "none" and k[4] in ("push_pull", "ddp") and ok:
            baseline[baseline_key(k)] = ok
    print("| model | ranks | epochs | lr | allreduce | compression | seeds | mean test accuracy | "
          "per seed | vs none (pp) | standard error (pp) | compression ratio | failed | "
          "EF warnings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(groups, key=lambda k: (k[:4], k[4] == "ddp", k[4] != "push_pull",
                                           k[5] != "none", k[6] or 0, k[7])):
        runs = sorted(groups[k], key=lambda r: r["seed"])
        ok = [r for r in runs if not r.get("failed")]
        acc = [r["test_accuracy"] for r in ok]
        mean = statistics.mean(acc) if acc else float("nan")
        base = baseline.get(baseline_key(k))
        delta = (mean - statistics.mean(base)) * 100 if acc and base else float("nan")
        error = standard_error(acc, base) if k[5] != "none" else None
        ratio = statistics.mean(r["compression_ratio"] for r in ok) if ok else float("nan")
        per_seed = ", ".join(f"{r['test_accuracy']:.4f}" if not r.get("failed") else "failed"
                             for r in runs)
        failed = [r for r in runs if r.get("failed")]
        why = "; ".join(f"seed {r['seed']}: {r.get('why', '')[:80]}" for r in failed)
        warnings = sum(warnings_in(r) for r in runs)
        print(f"{label(k)}| {len(runs)} | {mean:.4f} | {per_seed} | {delta:+.2f} | "
              f"{'' if error is None else f'{error:.2f}'} | {ratio:.1f}x | {len(failed)}{' (' + why + ')' if why else ''} | {warnings} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
