#!/usr/bin/env python3
"""Prints the tables of docs/ACCURACY.md from the JSON lines tools/accuracy/run_matrix.sh wrote.

    /usr/bin/python3 tools/accuracy/summarize.py accuracy_results.jsonl [more.jsonl ...]

One row per configuration (ranks, epochs, learning rate, allreduce algorithm, compression,
sparsity, engine settings such as THREELC_SCALE_TILE): the seeds run, mean test accuracy (and per seed), its difference
from the uncompressed runs with the same ranks, epochs and learning rate, in percentage points, the mean compression ratio, and the runs that failed
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

WARNING = re.compile(r"running away|NaN or Inf")


def key(run: dict) -> tuple:
    sparsity = run.get("sparsity") if run.get("compression") == "threelc" else None
    return (int(run["ranks"]), int(run.get("epochs", 2)), float(run.get("lr", 0.02)),
            run.get("algorithm", "push_pull"), run["compression"],
            None if sparsity is None else float(sparsity), run.get("settings") or "")


def label(k: tuple) -> str:
    ranks, epochs, lr, algorithm, compression, sparsity, settings = k
    what = "none" if compression == "none" else f"3LC s={sparsity:g}"
    if settings:
        what += f", `{settings}`"
    return f"| {ranks} | {epochs} | {lr:g} | {algorithm} | {what} "


def warnings_in(run: dict) -> int:
    logs = run["_logs"]
    if not logs.is_dir():
        return 0
    sparsity = run.get("sparsity")
    settings = run.get("settings") or ""
    chunk = "-" + re.sub(r"[^A-Za-z0-9=.]", "_", settings) if settings else ""
    stem = (f"np{run['ranks']}-{run.get('algorithm', 'push_pull')}-{run['compression']}-"
            f"s{sparsity if sparsity is not None else '1.0'}")
    path = logs / f"{stem}{chunk}-lr{run.get('lr')}-e{run.get('epochs')}-seed{run['seed']}.log"
    if not path.exists():  # logs of run_matrix.sh before it named the learning rate
        path = logs / f"{stem}-seed{run['seed']}.log"
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text(errors="replace").splitlines()
               if WARNING.search(line))


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
        if k[4] == "none" and ok:
            baseline[k[:3]] = statistics.mean(ok)
    print("| ranks | epochs | lr | allreduce | compression | seeds | mean test accuracy | "
          "per seed | vs none (pp) | compression ratio | failed | EF warnings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(groups, key=lambda k: (k[:3], k[3] != "push_pull", k[4] != "none",
                                           k[5] or 0, k[6])):
        runs = sorted(groups[k], key=lambda r: r["seed"])
        ok = [r for r in runs if not r.get("failed")]
        acc = [r["test_accuracy"] for r in ok]
        mean = statistics.mean(acc) if acc else float("nan")
        delta = (mean - baseline[k[:3]]) * 100 if acc and k[:3] in baseline else float("nan")
        ratio = statistics.mean(r["compression_ratio"] for r in ok) if ok else float("nan")
        per_seed = ", ".join(f"{r['test_accuracy']:.4f}" if not r.get("failed") else "failed"
                             for r in runs)
        failed = [r for r in runs if r.get("failed")]
        why = "; ".join(f"seed {r['seed']}: {r.get('why', '')[:80]}" for r in failed)
        warnings = sum(warnings_in(r) for r in runs)
        print(f"{label(k)}| {len(runs)} | {mean:.4f} | {per_seed} | {delta:+.2f} | "
              f"{ratio:.1f}x | {len(failed)}{' (' + why + ')' if why else ''} | {warnings} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
