#!/usr/bin/env python3
"""The name of one run's log in RESULTS.logs/: run_matrix.sh writes each run's output under it,
summarize.py reads the engine's warnings back from it.

    /usr/bin/python3 tools/eval/accuracy/run_log.py --model cnn --ranks 4 --algorithm push_pull \\
        --method threelc --sparsity 1.0 --settings "THREELC_SCALE_TILE=0" --lr 0.05 --epochs 2 \\
        --seed 0

prints np4-push_pull-threelc-s1.0-THREELC_SCALE_TILE=0-lr0.05-e2-seed0.log (no directory).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class RunLog:
    """One run of the matrix, as its log's name spells it (every field as written there)."""
    model: str       # the examples' model; "cnn" adds no prefix
    ranks: str
    algorithm: str   # push_pull, ring or ddp
    method: str      # the compression (push_pull, ring) or the DDP example's hook (ddp)
    sparsity: str
    settings: str    # engine variables, "VAR=value ..." ("" when none)
    hook_args: str   # the DDP example's hook arguments ("" when none)
    lr: str
    epochs: str
    seed: str


def _word(text: str) -> str:
    """`text` as one word of a file name: every character but A-Z a-z 0-9 = . becomes _."""
    return re.sub(r"[^A-Za-z0-9=.]", "_", text)


def _stem(run: RunLog) -> str:
    prefix = "" if run.model == "cnn" else f"{run.model}-"
    return f"{prefix}np{run.ranks}-{run.algorithm}-{run.method}-s{run.sparsity}"


def log_name(run: RunLog) -> str:
    """The log's file name."""
    tag = (f"-{_word(run.settings)}" if run.settings else "") + \
        (f"-{_word(run.hook_args)}" if run.hook_args else "")
    return f"{_stem(run)}{tag}-lr{run.lr}-e{run.epochs}-seed{run.seed}.log"


def short_log_name(run: RunLog) -> str:
    """The name of a log written without settings, learning rate and epochs in it (older
    RESULTS.logs/ directories); summarize.py falls back to it."""
    return f"{_stem(run)}-seed{run.seed}.log"


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for field in RunLog.__dataclass_fields__:
        p.add_argument("--" + field.replace("_", "-"), default="",
                       required=field not in ("settings", "hook_args"))
    print(log_name(RunLog(**vars(p.parse_args(argv)))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
