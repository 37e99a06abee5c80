"""worker.py's cases of what the engine reports: timeline, statistics, stall warnings and
timeouts, flush, runaway and non-finite error feedback."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time

import numpy as np

import threelc
import threelc.numpy as hvd
from threelc import engine
from cases_lifecycle import capture_fds
from worker_checks import RANK, SIZE, check, emit, expect_equal, expect_error, names_rank, out
from worker_data import first_bound_sum, ints


def trace_events(path):
    with open(path) as f:
        doc = json.load(f)  # must be valid JSON, closed at shutdown
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    check(isinstance(events, list) and events, f"{path}: no trace events")
    return events


def case_timeline():
    """THREELC_TIMELINE: rank 0 writes valid Chrome-trace JSON with negotiate, compress
    and send spans, one row per tensor (the engine writes the timeline on rank 0 only, as
    Horovod does; each rank is given its own path anyway, so none can clobber another's)."""
    directory = sys.argv[2]
    path = os.path.join(directory, f"timeline.{RANK}.json")
    os.environ["THREELC_TIMELINE"] = path
    hvd.init()
    for step in range(3):
        x = ints(RANK, (100_000,), -8, 8, salt=step).astype(np.float32)
        hvd.allreduce(x, name="tl/weights", compression=hvd.Compression.threelc)
        hvd.allreduce(np.ones(10, np.int32), name="tl/small", op=hvd.Sum)
    hvd.shutdown()
    if RANK != 0 and not os.path.exists(path):
        return
    events = trace_events(path)
    for e in events:
        check(isinstance(e, dict) and "ph" in e and "name" in e,
              lambda: f"{path}: not a trace event: {e!r}")
    names = " ".join(str(e.get("name", "")).lower() for e in events)
    wanted = ["negotiate", "compress"] + (["send"] if SIZE > 1 else [])
    for w in wanted:
        check(w in names, lambda: f"{path}: no {w!r} event among {sorted(set(names.split()))}")
    text = open(path).read()
    check("tl/weights" in text and "tl/small" in text,
          f"{path}: the tensors' names do not appear")
    out(f"STAT timeline {len(events)} events")


def case_stats():
    """THREELC_STATS=1 prints statistics at shutdown; threelc_get_statistics counts."""
    hvd.init()
    raw_bytes = 0
    ops = 0
    for step in range(4):
        x = ints(RANK, (200_000,), -8, 8, salt=step).astype(np.float32)
        hvd.allreduce(x, name="st/w", compression=hvd.Compression.threelc)
        raw_bytes += x.nbytes
        ops += 1
    y = np.ones(1000, np.int64)
    hvd.allreduce(y, name="st/ints", op=hvd.Sum)
    raw_bytes += y.nbytes
    ops += 1
    hvd.barrier()
    ops += 1
    s = threelc.statistics()
    out(f"STAT statistics {s}")
    check(s.operations >= ops, lambda: f"statistics().operations {s.operations} < {ops}")
    check(s.allreduce_bytes == raw_bytes,
          lambda: f"statistics().allreduce_bytes {s.allreduce_bytes}, expected {raw_bytes}")
    if SIZE > 1:
        check(s.wire_bytes_sent > 0 and s.wire_bytes_received > 0,
              lambda: f"no wire bytes counted: {s}")
        check(s.wire_bytes_sent < raw_bytes // 4,
              lambda: f"3LC traffic {s.wire_bytes_sent} bytes is not well below the "
                      f"{raw_bytes} input bytes")
    text = capture_fds(hvd.shutdown)
    for line in text.splitlines():
        out(f"STATS| {line}")
    check(text.strip(), "THREELC_STATS=1 but shutdown printed nothing")
    check(re.search(r"\d", text) and re.search(r"byte|ratio|allreduce", text, re.IGNORECASE),
          lambda: f"the statistics printed at shutdown show no byte counts: {text!r}")
    # without THREELC_STATS the same run prints no statistics
    del os.environ["THREELC_STATS"]
    hvd.init()
    hvd.allreduce(ints(RANK, (200_000,), -8, 8).astype(np.float32), name="st/w2")
    quiet = capture_fds(hvd.shutdown)
    first = text.strip().splitlines()[0]
    check(first not in quiet, lambda: f"without THREELC_STATS shutdown still printed: {quiet!r}")



def case_stall():
    """Rank 1 submits 'late' 2.5 s after the others (run with THREELC_STALL_CHECK_TIME=1):
    rank 0 warns naming the tensor and rank 1 (checked by the test), and the allreduce then
    completes with the right sum."""
    threelc.init()
    if RANK == 1:
        time.sleep(2.5)
    got = hvd.allreduce(np.full(4, RANK + 1, np.float32), name="late", op=engine.Sum)
    want = np.full(4, SIZE * (SIZE + 1) / 2, np.float32)
    expect_equal(got, want, "allreduce after a stall")
    threelc.shutdown()


def case_flush():
    """Run with THREELC_CYCLE_TIME_MS=1000. An allreduce waits for the next cycle (up to a
    second here) unless threelc_flush says there is nothing more to come: prints how long
    three flushed allreduces and an unflushed one took; the sums must be right."""
    threelc.init()
    engine.flush()  # harmless with nothing submitted
    hvd.allreduce(np.ones(1, np.float32), name="warm-up")
    for flushed in (True, True, True, False):
        time.sleep(0.3)  # the engine goes idle
        start = time.monotonic()
        handle = engine.allreduce(np.full(8, RANK + 1, np.float32), name=f"x.{flushed}",
                                  op=engine.Sum)
        if flushed:
            engine.flush()
        got = handle.wait()
        out(f"FLUSH {int(flushed)} {time.monotonic() - start:.3f}")
        expect_equal(got, np.full(8, SIZE * (SIZE + 1) / 2, np.float32), "flushed allreduce")
    threelc.shutdown()
    expect_error(engine.flush, engine.ENOTINIT, "flush after shutdown", "init")



def case_stall_timeout():
    """Every rank submits an allreduce under its own name (run with THREELC_STALL_TIMEOUT=2):
    after about 2 s each raises EMISMATCH naming its tensor, the other rank's tensor and the
    missing rank; then the engine keeps working: a name cached before, a new name, and the
    failed names themselves all run."""
    hvd.init()
    check(SIZE == 2, "the stall_timeout case runs with 2 ranks")
    other = 1 - RANK
    x = np.full(8, RANK + 1, np.float32)
    want = np.full(8, 3, np.float32)
    for _ in range(2):  # into the response cache
        expect_equal(hvd.allreduce(x, name="to/common", op=hvd.Sum), want, "to/common before")
    mine, theirs = ("grad.a", "grad.b") if RANK == 0 else ("grad.b", "grad.a")
    started = time.monotonic()
    message = expect_error(lambda: hvd.allreduce(x, name=mine, op=hvd.Sum), engine.EMISMATCH,
                           "allreduces under different names", f"'{mine}'", f"'{theirs}'",
                           "THREELC_STALL_TIMEOUT", names_rank(other))
    waited = time.monotonic() - started
    check(1.5 <= waited < 20, lambda: f"the timeout took {waited:.2f} s, expected about 2 s")
    out(f"STAT stall_timeout rank {RANK} after {waited:.2f} s: {message}")
    for name in ("to/common", "to/new", "grad.a", "grad.b", "to/common"):
        expect_equal(hvd.allreduce(x, name=name, op=hvd.Sum), want, f"{name} after the timeout")
    emit("to/after", want)
    hvd.shutdown()


FEEDBACK_N = 20_000  # float32 elements: above THREELC_MIN_COMPRESS_BYTES, so compressed


def case_feedback_runaway():
    """Rank 0 pushes one huge gradient (1e6) of 'fb/w' at sparsity 1.9, then 80 tiny ones
    (1e-6; the other ranks push tiny ones throughout): its residual outlives the gradients and
    rank 0 logs that the error feedback of 'fb/w' runs away (checked by the test, with
    THREELC_FEEDBACK_LIMIT=100). 'fb/ok', healthy at the same sparsity, raises nothing."""
    hvd.init()
    sparse = hvd.Compression.threelc(1.9)
    i = np.arange(FEEDBACK_N)
    h = hashlib.sha256()
    for step in range(81):
        scale = 1e6 if step == 0 and RANK == 0 else 1e-6
        g = (scale * (1.0 + (i % 7) / 7.0)).astype(np.float32)
        got = hvd.allreduce(g, name="fb/w", op=hvd.Sum, compression=sparse)
        check(np.all(np.isfinite(got)), f"fb/w step {step + 1}: a non-finite result")
        h.update(got.tobytes())
        ok = ints(RANK, (FEEDBACK_N,), -8, 8, salt=step).astype(np.float32)
        got = hvd.allreduce(ok, name="fb/ok", op=hvd.Sum, compression=sparse)
        h.update(got.tobytes())
    out(f"HASH fb/all {h.hexdigest()[:32]}")
    hvd.shutdown()


def case_feedback_nan():
    """A NaN and an Inf in rank 0's gradient of a compressed tensor at its 4th step: every rank
    gets NaN and Inf there and exact finite sums elsewhere in those blocks' reach; rank 0 warns
    naming the tensor (checked by the test); the next steps are finite again."""
    hvd.init()
    n = FEEDBACK_N
    nan_at, inf_at = n - 5000, 3
    for step in range(6):
        vals = [ints(r, (n,), -8, 8, salt=step).astype(np.float32) for r in range(SIZE)]
        mine = vals[RANK].copy()
        if step == 3 and RANK == 0:
            mine[nan_at] = np.nan
            mine[inf_at] = np.inf
        got = hvd.allreduce(mine, name="nan/w", op=hvd.Sum, compression=hvd.Compression.threelc)
        if step == 3:
            check(np.isnan(got[nan_at]), lambda: f"nan/w[{nan_at}] is {got[nan_at]}, not NaN")
            check(np.isposinf(got[inf_at]), lambda: f"nan/w[{inf_at}] is {got[inf_at]}, not +Inf")
            rest = np.delete(got, [nan_at, inf_at])
            check(np.all(np.isfinite(rest)), "non-finite values beyond the NaN and the Inf")
            emit("nan/w", got)
        else:
            check(np.all(np.isfinite(got)), f"nan/w step {step + 1}: a non-finite result")
            err = float(np.max(np.abs(got - np.sum(vals, axis=0))))
            check(err <= 4 * first_bound_sum(SIZE),
                  lambda: f"nan/w step {step + 1}: error {err} (the error feedback was lost?)")
    hvd.shutdown()
