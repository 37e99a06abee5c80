"""One rank of an engine job: ``threelcrun -np N /usr/bin/python3 worker.py CASE [ARGS]``.

Every case checks its own results against numpy references and exits non-zero with a line
``FAIL rank R CASE: what`` on stderr when anything is off. Lines the pytest side reads:

    HASH <key> <sha256 of dtype, shape and bytes>   compared across ranks (bitwise identity)
    STAT <key> ...                                  figures worth seeing in the test log
    DONE <case>                                     the case ran to its end on this rank

The cases live in modules by topic: cases_allreduce.py, cases_collectives.py,
cases_lifecycle.py, cases_observability.py, cases_feedback_checkpoint.py,
cases_process_sets.py; what they share in
worker_checks.py (this rank, checks, the printed lines) and worker_data.py (data, references,
3LC's bounds).
"""

from __future__ import annotations

import sys
import time

from threelc import engine
from threelc.engine import ThreelcError
from cases_allreduce import (case_async, case_big, case_dtypes_ops, case_error_feedback,
                             case_hierarchical, case_scale_tile, case_sizes)
from cases_collectives import case_collectives, case_deadlock, case_join, case_mismatch
from cases_feedback_checkpoint import case_feedback_checkpoint
from cases_lifecycle import case_api, case_bad_env, case_dead_peer, case_shutdown
from cases_observability import (case_feedback_nan, case_feedback_runaway, case_flush,
                                 case_stall, case_stall_timeout, case_stats, case_timeline)
from cases_process_sets import case_process_sets
from worker_checks import RANK, Fail, out

CASE = sys.argv[1] if len(sys.argv) > 1 else "?"

CASES = {
    "sizes": case_sizes,
    "dtypes_ops": case_dtypes_ops,
    "big": case_big,
    "error_feedback": case_error_feedback,
    "scale_tile": case_scale_tile,
    "async": case_async,
    "mismatch": case_mismatch,
    "deadlock": case_deadlock,
    "collectives": case_collectives,
    "join": case_join,
    "shutdown": case_shutdown,
    "bad_env": case_bad_env,
    "timeline": case_timeline,
    "stats": case_stats,
    "api": case_api,
    "stall": case_stall,
    "flush": case_flush,
    "dead_peer": case_dead_peer,
    "stall_timeout": case_stall_timeout,
    "feedback_runaway": case_feedback_runaway,
    "feedback_nan": case_feedback_nan,
    "feedback_checkpoint": case_feedback_checkpoint,
    "hierarchical": case_hierarchical,
    "process_sets": case_process_sets,
}


def main():
    if CASE not in CASES:
        print(f"worker.py: unknown case {CASE!r}; cases: {', '.join(CASES)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        CASES[CASE]()
    except Fail as e:
        print(f"FAIL rank {RANK} {CASE}: {e}", file=sys.stderr, flush=True)
        return 1
    except ThreelcError as e:
        print(f"FAIL rank {RANK} {CASE}: unexpected ThreelcError "
              f"({engine.error_name(e.code)}): {e}", file=sys.stderr, flush=True)
        return 1
    out(f"DONE {CASE} {time.monotonic() - started:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
