"""worker.py's cases of the other collectives and of cross-rank agreement: mismatched
submissions, a deadlock, broadcast / allgather / alltoall / reducescatter, join."""

from __future__ import annotations

import re
import time

import numpy as np

import threelc.numpy as hvd
from threelc import engine
from worker_checks import (RANK, SIZE, check, emit, expect_equal, expect_error, names_rank,
                           out)
from worker_data import ints, make, op_data


def case_deadlock():
    """Rank 0 waits for an allgather 'dl/a', rank 1 for an allreduce 'dl/b' (run with
    THREELC_DEADLOCK_TIMEOUT=3 and the default stall timeout of 600 s): the coordinator sees both ranks
    blocked with nothing to run, and after about 3 s each raises EMISMATCH naming the deadlock
    and both operations; then a matching allreduce runs."""
    hvd.init()
    check(SIZE == 2, "the deadlock case runs with 2 ranks")
    x = np.full(4, RANK + 1, np.float32)
    if RANK == 0:
        def wait_for_mine():
            hvd.allgather(x, name="dl/a")
    else:
        def wait_for_mine():
            hvd.allreduce(x, name="dl/b", op=hvd.Sum)
    started = time.monotonic()
    message = expect_error(wait_for_mine, engine.EMISMATCH, "mismatched waits", "deadlock",
                           "THREELC_DEADLOCK_TIMEOUT", "rank 0 waits for allgather of tensor 'dl/a'",
                           "rank 1 waits for allreduce of tensor 'dl/b'")
    waited = time.monotonic() - started
    check(2.5 <= waited < 10, lambda: f"the deadlock was broken after {waited:.2f} s, expected "
                                      "about 3 s")
    out(f"STAT deadlock rank {RANK} after {waited:.2f} s: {message}")
    want = np.full(4, 3, np.float32)
    for name in ("dl/after", "dl/b"):
        expect_equal(hvd.allreduce(x, name=name, op=hvd.Sum), want, f"{name} after the deadlock")
    emit("dl/after", want)
    hvd.shutdown()


def case_mismatch():
    """Shapes, dtypes, ops that differ across ranks: an EMISMATCH error on every rank naming
    the ranks and what each sent; a duplicate name in flight is refused at submission; the
    engine keeps working."""
    hvd.init()
    check(SIZE >= 2, "the mismatch case needs at least 2 ranks")
    last = SIZE - 1

    def ok(tag):
        x = ints(RANK, (100,), -5, 5, salt=len(tag)).astype(np.float32)
        ref = np.sum([ints(r, (100,), -5, 5, salt=len(tag)) for r in range(SIZE)], axis=0)
        got = hvd.allreduce(x, name=f"mm/ok/{tag}", op=hvd.Sum)
        expect_equal(got, ref.astype(np.float32), f"allreduce after {tag}")

    ok("start")
    # shapes: the last rank sends 5 elements, the others 4
    x = np.ones(5 if RANK == last else 4, np.float32)
    expect_error(lambda: hvd.allreduce(x, name="mm/shape", op=hvd.Sum), engine.EMISMATCH,
                 "shape mismatch", "mm/shape", names_rank(last), re.compile(r"\b4\b"),
                 re.compile(r"\b5\b"))
    ok("shape")
    # dtypes: rank 0 sends float32, the others int32
    x = np.ones(6, np.float32 if RANK == 0 else np.int32)
    expect_error(lambda: hvd.allreduce(x, name="mm/dtype", op=hvd.Sum), engine.EMISMATCH,
                 "dtype mismatch", "mm/dtype", names_rank(0), "float32", "int32")
    ok("dtype")
    # ops: rank 0 sums, the others take the max
    x = np.ones(6, np.float32)
    expect_error(lambda: hvd.allreduce(x, name="mm/op", op=hvd.Sum if RANK == 0 else hvd.Max),
                 engine.EMISMATCH, "op mismatch", "mm/op", names_rank(0), "sum", "max")
    # allgather: trailing dimensions differ on the last rank
    x = np.ones((2, 4 if RANK == last else 3), np.float32)
    expect_error(lambda: hvd.allgather(x, name="mm/gather"), engine.EMISMATCH,
                 "allgather trailing-dimension mismatch", "mm/gather", names_rank(last))
    ok("gather")
    # a duplicate name in flight on rank 0 is refused at submission, on rank 0 only
    x = ints(RANK, (64,), -5, 5, salt=3).astype(np.float32)
    ref = np.sum([ints(r, (64,), -5, 5, salt=3) for r in range(SIZE)], axis=0).astype(np.float32)
    if RANK == 0:
        first = hvd.allreduce_async(x, name="mm/dup", op=hvd.Sum)
        expect_error(lambda: hvd.allreduce_async(x, name="mm/dup", op=hvd.Sum),
                     engine.EDUPLICATE, "duplicate name in flight", "mm/dup")
        check(not first.poll(), "mm/dup finished before the other ranks submitted it")
        got = first.wait(timeout=30)
    else:
        time.sleep(0.5)  # rank 0 submits twice meanwhile
        got = hvd.allreduce(x, name="mm/dup", op=hvd.Sum)
    expect_equal(got, ref, "mm/dup after the refused duplicate")
    # the name is free again once the first finished
    got = hvd.allreduce(x, name="mm/dup", op=hvd.Sum)
    expect_equal(got, ref, "mm/dup reused")
    ok("dup")
    hvd.barrier()
    hvd.shutdown()


def case_collectives():
    """broadcast from every root, allgather with different first dimensions (0 included),
    reducescatter, alltoall with uneven splits, barrier."""
    hvd.init()
    n = SIZE
    # broadcast
    for root in range(n):
        for dtype_name in ("float32", "int64", "uint8", "int16", "bfloat16", "float16"):
            shape = (3, 4)
            mine, dt = make(dtype_name, ints(RANK, shape, 0, 100, salt=root))
            want, _ = make(dtype_name, ints(root, shape, 0, 100, salt=root))
            got = hvd.broadcast(mine, root_rank=root, name=f"bc/{root}/{dtype_name}", dtype=dt)
            expect_equal(got, want, f"broadcast {dtype_name} from root {root}")
            expect_equal(mine, make(dtype_name, ints(RANK, shape, 0, 100, salt=root))[0],
                         "broadcast must not modify its input")
    # allgather: first dimensions 3, 0, 5, 1, 2 (rank 1 contributes nothing)
    rows = [3, 0, 5, 1, 2]
    for dtype_name, tail in (("float32", (3,)), ("int8", ()), ("int16", (2,)),
                             ("float64", (2, 2))):
        parts = [make(dtype_name, ints(r, (rows[r],) + tail, -100, 100, salt=7))[0]
                 for r in range(n)]
        got = hvd.allgather(parts[RANK], name=f"ag/{dtype_name}")
        expect_equal(got, np.concatenate(parts, axis=0), f"allgather {dtype_name} rows {rows[:n]}")
        emit(f"ag/{dtype_name}", got)
    empty = np.zeros((0, 4), np.int32)
    got = hvd.allgather(empty, name="ag/all_empty")
    expect_equal(got, np.zeros((0, 4), np.int32), "allgather of empty tensors")
    # reducescatter: 2n+1 rows, not divisible by n; the first (2n+1) % n ranks get a row more
    dim0 = 2 * n + 1
    q, rem = divmod(dim0, n)
    lengths = [q + (1 if r < rem else 0) for r in range(n)]
    start = sum(lengths[:RANK])
    vals = [ints(r, (dim0, 3), -50, 50, salt=11) for r in range(n)]
    total = np.sum(vals, axis=0)
    got = hvd.reducescatter(vals[RANK].astype(np.int32), name="rs/sum", op=hvd.Sum)
    expect_equal(got, total[start:start + lengths[RANK]].astype(np.int32),
                 f"reducescatter sum of {dim0} rows (rank {RANK} rows {start}..)")
    vals, v = op_data("float32", "average", (dim0, 3), RANK, salt=12)
    got = hvd.reducescatter(vals[RANK].astype(np.float32), name="rs/avg")  # Average default
    expect_equal(got, v[start:start + lengths[RANK]].astype(np.float32),
                 "reducescatter average (default op)")
    vals = [ints(r, (dim0,), 0, 100, salt=13) for r in range(n)]
    got = hvd.reducescatter(vals[RANK].astype(np.float64), name="rs/max", op=hvd.Max)
    expect_equal(got, np.max(vals, axis=0)[start:start + lengths[RANK]].astype(np.float64),
                 "reducescatter max")
    # alltoall, uneven splits: rank r sends (r + 2j) % 3 rows to rank j
    splits = [[(r + 2 * j) % 3 for j in range(n)] for r in range(n)]

    def rows_of(r):
        # row content: (source, destination, index) so a misplaced row is visible
        data = []
        for j in range(n):
            for t in range(splits[r][j]):
                data.append([r, j, t])
        return np.array(data, dtype=np.int64).reshape(-1, 3)

    got, received = hvd.alltoall(rows_of(RANK), splits=splits[RANK], name="a2a/uneven")
    want = np.concatenate([rows_of(j)[sum(splits[j][:RANK]):sum(splits[j][:RANK + 1])]
                           for j in range(n)], axis=0)
    expect_equal(got, want, f"alltoall with splits {splits[RANK]}")
    expect_equal(np.asarray(received), np.array([splits[j][RANK] for j in range(n)], np.int64),
                 "alltoall received_splits")
    # alltoall, equal parts (splits=None): 2 rows to each rank
    x = np.arange(2 * n * 2, dtype=np.float32).reshape(2 * n, 2) + 1000 * RANK
    got, received = hvd.alltoall(x, name="a2a/equal")
    want = np.concatenate([(np.arange(2 * n * 2, dtype=np.float32).reshape(2 * n, 2)
                            + 1000 * j)[2 * RANK:2 * RANK + 2] for j in range(n)])
    expect_equal(got, want, "alltoall with equal parts")
    expect_equal(np.asarray(received), np.full(n, 2, np.int64), "alltoall equal received_splits")
    # barrier: rank 0 arrives 0.4 s late; nobody may leave before it arrived
    hvd.barrier()
    if RANK == 0:
        time.sleep(0.4)
    t0 = time.monotonic()
    hvd.barrier()
    waited = time.monotonic() - t0
    check(RANK == 0 or n == 1 or waited >= 0.3,
          lambda: f"barrier returned after {waited:.3f} s although rank 0 arrived 0.4 s late")
    hvd.shutdown()


def case_join():
    """The last rank joins first; the others allreduce (it contributes zeros) and allgather
    (it contributes no rows); rank 0 joins last and every rank gets 0 from join()."""
    hvd.init()
    n = SIZE
    joiner = n - 1
    active = [r for r in range(n) if r != joiner] if n > 1 else [0]
    if RANK == joiner and n > 1:
        last = hvd.join()
    else:
        for step in range(5):
            vals = [ints(r, (1000,), -100, 100, salt=step) for r in range(n)]
            got = hvd.allreduce(vals[RANK].astype(np.int32), name=f"join/{step}", op=hvd.Sum)
            ref = np.sum([vals[r] for r in active], axis=0).astype(np.int32)
            expect_equal(got, ref, f"allreduce {step} while rank {joiner} has joined")
            f = hvd.allreduce(vals[RANK].astype(np.float32), name=f"join/f{step}", op=hvd.Sum,
                              compression=hvd.Compression.none)
            expect_equal(f, ref.astype(np.float32), f"float allreduce {step} while joined")
        parts = [ints(r, (r + 1, 2), 0, 9, salt=5) for r in range(n)]
        got = hvd.allgather(parts[RANK], name="join/gather")
        expect_equal(got, np.concatenate([parts[r] for r in active]),
                     "allgather while a rank has joined")
        if RANK == 0:
            time.sleep(0.8)  # rank 0 joins last
        last = hvd.join()
    check(last == 0, lambda: f"join() returned {last}, but rank 0 joined last")
    # everything works again afterwards, with every rank contributing
    vals = [ints(r, (77,), -10, 10, salt=9) for r in range(n)]
    got = hvd.allreduce(vals[RANK].astype(np.int64), name="join/after", op=hvd.Sum)
    expect_equal(got, np.sum(vals, axis=0).astype(np.int64), "allreduce after join")
    hvd.shutdown()
