"""One rank of an engine job: ``threelcrun -np N /usr/bin/python3 worker.py CASE [ARGS]``.

Every case checks its own results against numpy references and exits non-zero with a line
``FAIL rank R CASE: what`` on stderr when anything is off. Lines the pytest side reads:

    HASH <key> <sha256 of dtype, shape and bytes>   compared across ranks (bitwise identity)
    STAT <key> ...                                  figures worth seeing in the test log
    DONE <case>                                     the case ran to its end on this rank

Data are small integers wherever results are compared exactly, so every float sum is exact
and any difference is a fault, not rounding.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import struct
import sys
import tempfile
import threading
import time

import numpy as np

import threelc
import threelc.numpy as hvd
from threelc import engine
from threelc.engine import ThreelcError

CASE = sys.argv[1] if len(sys.argv) > 1 else "?"
RANK = int(os.environ.get("THREELC_RANK", "0"))
SIZE = int(os.environ.get("THREELC_SIZE", "1"))
MIN_COMPRESS_BYTES = 1024  # THREELC_MIN_COMPRESS_BYTES default
SCALE_TILE = 320  # THREELC_SCALE_TILE default
X = 8.0  # data of the compressed cases are integers in [-X, X]


class Fail(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Fail(message() if callable(message) else message)


def out(line):
    print(line, flush=True)


def digest(array) -> str:
    a = np.ascontiguousarray(array)
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(memoryview(a).cast("B") if a.size else b"")
    return h.hexdigest()[:32]


def emit(key, array):
    out(f"HASH {key} {digest(array)}")


def first_difference(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    g = got.reshape(-1)
    w = want.reshape(-1)
    both_nan = np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
    bad = np.nonzero(~((g == w) | both_nan))[0]
    if bad.size == 0:
        return None
    i = int(bad[0])
    return (f"{bad.size} of {g.size} elements differ; first at flat index {i}: got {g[i]!r}, "
            f"expected {w[i]!r}")


def expect_equal(got, want, what):
    diff = first_difference(got, want)
    check(diff is None, lambda: f"{what}: {diff}")


def expect_error(fn, code, what, *needles):
    """Calls fn(); it must raise ThreelcError with `code` whose message contains every needle
    (str: substring, case-insensitive; re.Pattern: search). Returns the message."""
    try:
        fn()
    except ThreelcError as e:
        message, got = str(e), e.code
    else:
        raise Fail(f"{what}: no error was raised (expected {engine.error_name(code)})")
    check(got == code, lambda: f"{what}: error code {got} ({engine.error_name(got)}), expected "
                               f"{code} ({engine.error_name(code)}); message: {message}")
    for needle in needles:
        if isinstance(needle, re.Pattern):
            ok = needle.search(message) is not None
        else:
            ok = needle.lower() in message.lower()
        shown = getattr(needle, "pattern", needle)
        check(ok, lambda: f"{what}: message does not mention {shown!r}: {message}")
    return message


def names_rank(r):
    """Pattern: the message names rank r ("rank 2", "ranks 0, 2", "ranks 1 and 2", "rank=2")."""
    return re.compile(rf"\branks?\b[\s:=#]*(?:\d+\s*(?:,|and|-|/)\s*)*{r}\b", re.IGNORECASE)


# ------------------------------------------------------------------------- data

def ints(rank, shape, lo, hi, salt=0):
    """Deterministic integers in [lo, hi] for `rank` (int64)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    k = i * 31 + (i >> 7) + rank * 7919 + salt * 104729
    return ((k % (hi - lo + 1)) + lo).reshape(shape)


def to_bf16(values):
    """bf16 bit patterns (uint16) of float values exactly representable in bf16."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    if np.any(bits & 0xFFFF):
        raise ValueError("value not representable in bfloat16")
    return (bits >> 16).astype(np.uint16)


def from_bf16(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


DTYPE_NAMES = ["uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def make(dtype_name, values):
    """The engine-level array for `values` (int64 or float) in dtype_name, and its dtype= arg."""
    if dtype_name == "bfloat16":
        return to_bf16(values), "bfloat16"
    return np.asarray(values).astype(dtype_name), None


def as_float(dtype_name, array):
    """Values of an engine result as float64 (bf16 bits decoded)."""
    if dtype_name == "bfloat16":
        return from_bf16(array).astype(np.float64)
    return np.asarray(array).astype(np.float64)


def ulp(dtype_name, values):
    if dtype_name == "bfloat16":
        v = np.abs(np.asarray(values, np.float32))
        e = np.floor(np.log2(np.maximum(v, np.float32(1e-30))))
        return np.exp2(e - 7)
    return np.spacing(np.abs(np.asarray(values).astype(dtype_name))).astype(np.float64)


# ------------------------------------------------------------------ bounds (3LC)

def first_bound_sum(n, x=X):
    """|out - exact sum| after one compressed allreduce with fresh error buffers (push_pull,
    s = 1): each of the n-1 push residuals is at most half its block's scale, scale <= x;
    the owner's sum is at most n x, its pull residual at most n x / 2."""
    return 0.0 if n == 1 else (n - 1) * x / 2 + n * x / 2


def drift_bound_sum(n, algorithm, x=X):
    """Bound on |sum over steps of outputs - sum over steps of exact sums| that holds at
    every step, with error feedback under one tensor name (s = 1).

    Every encoding satisfies d + e_new == a == (input) + e_old exactly, so the outputs'
    running sum equals the exact running sum minus the sum of every rank's current residual
    at that element (the residuals telescope); it remains to bound each residual. A residual
    is at most half its block's scale, and the scale is the largest |input + residual| in
    the block (s = 1), so a residual E on an input of magnitude <= I satisfies
    E <= (I + E) / 2, i.e. E <= I, and the decoded value is at most I + E <= 2 I.

    push_pull: each of the n-1 push residuals <= x (input x), decoded pushes <= 2x, the
    owner's sum <= x + 2x(n-1) =: Y and its pull residual <= Y:
    total (n-1) x + x + 2x(n-1) = 3x(n-1) + x.

    ring: hop k (k = 1..n-1) compresses the decoded partial sum D_{k-1} (D_0 = 0) plus its
    own x: input <= D_{k-1} + x, so E_k <= D_{k-1} + x and D_k <= 2 (D_{k-1} + x), i.e.
    D_k <= (2^(k+1) - 2) x and E_k <= (2^k - 1) x; the owner's sum is <= D_{n-1} + x =
    (2^n - 1) x and so is its final residual: total sum_k (2^k - 1) x + (2^n - 1) x =
    (2^(n+1) - n - 2) x.
    """
    if n == 1:
        return 0.0
    if algorithm == "ring":
        return float((2 ** (n + 1) - n - 2) * x)
    return 3 * x * (n - 1) + x


# ------------------------------------------------------------------------ cases

def case_sizes():
    """Sizes 0..6, either side of THREELC_MIN_COMPRESS_BYTES, not divisible by N, n-d
    shapes; uncompressed exact, compressed identical on every rank and within the bound."""
    hvd.init()
    threshold = MIN_COMPRESS_BYTES // 4
    shapes = [(0,), (1,), (4,), (5,), (6,), (7919,), (threshold - 1,), (threshold,),
              (threshold + 1,), (3 * threshold + SIZE + 1,), (0, 3), (3, 5, 7), ()]
    for shape in shapes:
        key = "x".join(map(str, shape)) or "scalar"
        data = [ints(r, shape, -8, 8, salt=len(shape)).astype(np.float32) for r in range(SIZE)]
        mine = data[RANK]
        exact = np.sum(np.stack(data), axis=0, dtype=np.float64).astype(np.float32)
        # uncompressed: exactly the sum
        got = hvd.allreduce(mine, name=f"sizes/{key}/raw", op=hvd.Sum,
                            compression=hvd.Compression.none)
        expect_equal(got, exact, f"allreduce(Sum, none) of shape {shape}")
        emit(f"{key}/raw", got)
        # 3LC requested: raw below the threshold, compressed at and above it
        got = hvd.allreduce(mine, name=f"sizes/{key}/3lc", op=hvd.Sum,
                            compression=hvd.Compression.threelc)
        emit(f"{key}/3lc", got)
        check(got.shape == exact.shape and got.dtype == np.float32,
              lambda: f"3lc allreduce of {shape}: got shape {got.shape} dtype {got.dtype}")
        if SIZE == 1 or mine.nbytes < MIN_COMPRESS_BYTES:
            expect_equal(got, exact, f"allreduce(Sum, threelc) of shape {shape} "
                                     f"({mine.nbytes} bytes < THREELC_MIN_COMPRESS_BYTES, or "
                                     f"one rank): must be exact")
        else:
            err = float(np.max(np.abs(got.astype(np.float64) - exact)))
            check(err <= first_bound_sum(SIZE),
                  lambda: f"allreduce(Sum, threelc) of shape {shape}: max error {err} exceeds "
                          f"the first-step bound {first_bound_sum(SIZE)}")
            check(err > 0, lambda: f"allreduce(Sum, threelc) of shape {shape} "
                                   f"({mine.nbytes} bytes >= THREELC_MIN_COMPRESS_BYTES) was "
                                   f"exact: it was not compressed")
            out(f"STAT sizes {key} 3lc max_error {err} bound {first_bound_sum(SIZE)}")
        # Horovod defaults: op=Average, compression from THREELC_COMPRESSION (threelc)
        got = hvd.allreduce(mine, name=f"sizes/{key}/default")
        emit(f"{key}/default", got)
        exact_avg = exact.astype(np.float64) / SIZE
        if SIZE == 1 or mine.nbytes < MIN_COMPRESS_BYTES:
            tol = ulp("float32", exact_avg)
        else:
            tol = first_bound_sum(SIZE) / SIZE
        err = np.abs(got.astype(np.float64) - exact_avg)
        check(np.all(err <= tol), lambda: f"allreduce() (Average, default compression) of "
                                          f"shape {shape}: error {float(np.max(err))} too large")
    hvd.shutdown()


def op_data(dtype_name, op, shape, rank, salt):
    """(values for `rank` as int64/float, the exact reference as float64 given all ranks)."""
    n = SIZE
    wide = dtype_name in ("int32", "int64", "float32", "float64")
    if op == "sum":
        lo, hi = {"uint8": (0, 50 // n), "int8": (-20, 20), "float16": (-100, 100),
                  "bfloat16": (-40, 40)}.get(dtype_name, (-1000, 1000))
        vals = [ints(r, shape, lo, hi, salt) for r in range(n)]
        return vals, np.sum(vals, axis=0).astype(np.float64)
    if op == "average":
        # v + d_r with the d_r summing to zero: the average is exactly v in any rounding.
        lo, hi = {"uint8": (5, 20), "int8": (-10, 10)}.get(dtype_name, (-20, 20))
        v = ints(99, shape, lo, hi, salt)
        c = ints(98, shape, 0, 4, salt)
        vals = [v + (c * (n - 1) if r == 0 else -c) for r in range(n)]
        return vals, v.astype(np.float64)
    if op in ("min", "max"):
        lo, hi = {"uint8": (0, 255), "int8": (-128, 127), "float16": (-2000, 2000),
                  "bfloat16": (-128, 128)}.get(dtype_name, (-100000, 100000) if wide else None)
        vals = [ints(r, shape, lo, hi, salt) for r in range(n)]
        f = np.min if op == "min" else np.max
        return vals, f(np.stack(vals), axis=0).astype(np.float64)
    if op == "product":
        vals = []
        for r in range(n):
            if dtype_name == "uint8":
                v = ints(r, shape, 1, 2, salt)
            else:
                v = ints(r, shape, -1, 2, salt)
                v[v == 0] = 1
                v[(np.arange(v.size).reshape(shape) % 11) == (r % 11)] = 0  # some zeros
            vals.append(v)
        return vals, np.prod(np.stack(vals), axis=0).astype(np.float64)
    raise ValueError(op)


OPS = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
       "product": hvd.Product}


def case_dtypes_ops():
    """Every dtype x every op, prescale/postscale; results exactly the numpy reference."""
    hvd.init()
    shape = (7, 17)  # 119 values: not divisible by N; under THREELC_MIN_COMPRESS_BYTES as float64
    salt = 0
    for dtype_name in DTYPE_NAMES:
        for op_name, op in OPS.items():
            salt += 1
            vals, ref = op_data(dtype_name, op_name, shape, RANK, salt)
            mine, dt = make(dtype_name, vals[RANK])
            got = hvd.allreduce(mine, name=f"ops/{dtype_name}/{op_name}", op=op, dtype=dt)
            check(got.dtype == mine.dtype and got.shape == shape,
                  lambda: f"{dtype_name} {op_name}: result dtype {got.dtype} shape {got.shape}")
            expect_equal(as_float(dtype_name, got), ref, f"allreduce {dtype_name} {op_name}")
            emit(f"ops/{dtype_name}/{op_name}", got)
        # prescale / postscale
        salt += 1
        if dtype_name in ("uint8", "int8"):
            lo, hi = (0, 8) if dtype_name == "uint8" else (-4, 4)
            pre, post = 2.0, 3.0  # integer factors: no rounding question for integers
        elif dtype_name in ("int32", "int64"):
            lo, hi, pre, post = -1000, 1000, 2.0, 3.0
        else:
            lo, hi, pre, post = -20, 20, 0.5, 4.0  # powers of two: exact in every float type
        vals = [ints(r, shape, lo, hi, salt) for r in range(SIZE)]
        mine, dt = make(dtype_name, vals[RANK])
        ref = np.sum(vals, axis=0).astype(np.float64) * pre * post
        got = hvd.allreduce(mine, name=f"ops/{dtype_name}/scaled_sum", op=hvd.Sum,
                            prescale_factor=pre, postscale_factor=post, dtype=dt)
        expect_equal(as_float(dtype_name, got), ref,
                     f"allreduce {dtype_name} sum prescale {pre} postscale {post}")
        emit(f"ops/{dtype_name}/scaled_sum", got)
        if dtype_name in ("float16", "bfloat16", "float32", "float64"):
            # Average with scales: v * 2 / ... * 0.25 = v / 2, exact
            salt += 1
            vals, v = op_data(dtype_name, "average", shape, RANK, salt)
            mine, dt = make(dtype_name, vals[RANK])
            got = hvd.allreduce(mine, name=f"ops/{dtype_name}/scaled_avg", op=hvd.Average,
                                prescale_factor=2.0, postscale_factor=0.25, dtype=dt)
            expect_equal(as_float(dtype_name, got), v * 0.5,
                         f"allreduce {dtype_name} average prescale 2 postscale 0.25")
            # Average of arbitrary integers: the sum divided by N, within one ulp
            salt += 1
            vals = [ints(r, shape, -40, 40, salt) for r in range(SIZE)]
            mine, dt = make(dtype_name, vals[RANK])
            want = np.sum(vals, axis=0).astype(np.float64) / SIZE
            got = as_float(dtype_name, hvd.allreduce(mine, name=f"ops/{dtype_name}/avg",
                                                     op=hvd.Average, dtype=dt))
            err = np.abs(got - want)
            tol = ulp(dtype_name, want)
            check(np.all(err <= tol), lambda: f"allreduce {dtype_name} average: error "
                                              f"{float(np.max(err))} above one ulp")
    # Above the compression threshold, with 3LC requested: integers and min/max/product are
    # never compressed, so they stay exact.
    big = (MIN_COMPRESS_BYTES // 4 + 1000,)
    for dtype_name, op_name in [("float32", "min"), ("float32", "max"), ("float32", "product"),
                                ("int32", "sum"), ("float64", "min")]:
        salt += 1
        vals, ref = op_data(dtype_name, op_name, big, RANK, salt)
        mine, dt = make(dtype_name, vals[RANK])
        got = hvd.allreduce(mine, name=f"ops/big/{dtype_name}/{op_name}", op=OPS[op_name],
                            compression=hvd.Compression.threelc, dtype=dt)
        expect_equal(as_float(dtype_name, got), ref,
                     f"allreduce {dtype_name} {op_name} of {mine.nbytes} bytes with "
                     f"Compression.threelc (must not be compressed)")
    hvd.shutdown()


def case_big():
    """50 M float32 elements: exact uncompressed sum, compressed within the bound."""
    hvd.init()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000_000
    i = np.arange(n, dtype=np.int32)

    def data(r):
        return ((i * 31 + (i >> 7) + r * 7) % 17 - 8).astype(np.float32)

    exact = data(0)
    for r in range(1, SIZE):
        exact += data(r)  # small integers: exact in float32
    mine = data(RANK)
    t0 = time.monotonic()
    got = hvd.allreduce(mine, name="big/raw", op=hvd.Sum, compression=hvd.Compression.none)
    t1 = time.monotonic()
    expect_equal(got, exact, f"allreduce of {n} float32 (none)")
    del got
    t2 = time.monotonic()
    got = hvd.allreduce(mine, name="big/3lc", op=hvd.Sum, compression=hvd.Compression.threelc)
    t3 = time.monotonic()
    emit("big/3lc", got)
    got -= exact
    np.abs(got, out=got)
    err = float(got.max())
    check(err <= first_bound_sum(SIZE), lambda: f"allreduce of {n} float32 (threelc): max "
                                                f"error {err} > bound {first_bound_sum(SIZE)}")
    check(SIZE == 1 or err > 0, "allreduce of 50M float32 with threelc was exact")
    out(f"STAT big raw {t1 - t0:.2f}s 3lc {t3 - t2:.2f}s max_error {err}")
    hvd.shutdown()


def case_error_feedback():
    """100 steps of a compressed Average under one name: outputs identical on every rank, and
    the running sum of outputs within a step-independent bound of the exact running sum."""
    algorithm = os.environ.get("THREELC_ALLREDUCE", "push_pull")
    hvd.init()
    n = 100_003
    steps = 100
    bound = drift_bound_sum(SIZE, algorithm) / SIZE
    slack = 1e-2  # fp32 rounding of the adds and the division, summed over 100 steps
    i = np.arange(n, dtype=np.int64)
    cum_out = np.zeros(n)
    cum_exact = np.zeros(n)
    h = hashlib.sha256()
    worst = 0.0
    for step in range(steps):
        # two patterns alternate, so a missing error feedback would drift without bound
        k = i * 31 + (i >> 7) + (step % 2) * 5

        def data(r):
            return ((k + r * 7919) % 17 - 8).astype(np.float32)

        mine = data(RANK)
        exact = np.sum([data(r).astype(np.float64) for r in range(SIZE)], axis=0) / SIZE
        got = hvd.allreduce(mine, name="ef/w", op=hvd.Average,
                            compression=hvd.Compression.threelc)
        h.update(got.tobytes())
        cum_out += got
        cum_exact += exact
        drift = float(np.max(np.abs(cum_out - cum_exact)))
        worst = max(worst, drift)
        check(drift <= bound + slack,
              lambda: f"{algorithm} step {step + 1}: running-sum drift {drift} exceeds the "
                      f"bound {bound} (N={SIZE})")
        if step + 1 in (10, 100):
            out(f"HASH ef/{step + 1} {h.hexdigest()[:32]}")
            out(f"STAT ef {algorithm} N={SIZE} step {step + 1} drift {drift:.4f} "
                f"worst {worst:.4f} bound {bound:.4f}")
        if step == 0 and SIZE > 1:
            check(drift > 0, "the first compressed step was exact: nothing was compressed")
    hvd.shutdown()


def case_scale_tile():
    """THREELC_SCALE_TILE: every rank's segment (one block each) starts with 1280 large values,
    the rest 1000x smaller. With one scale per block (0) the small values stay in the residuals
    on the first step; with a scale per tile (1280, or unset: the default 320) they are sent. Outputs
    identical on every rank either way, and the running sum stays within the residual bound of
    the exact one over 20 steps."""
    tile = int(os.environ.get("THREELC_SCALE_TILE") or SCALE_TILE)
    hvd.init()
    segment = 16 * 1280  # above THREELC_MIN_COMPRESS_BYTES on 2 ranks
    n = segment * SIZE
    i = np.arange(n)
    small = i % segment >= 1280
    h = hashlib.sha256()
    cum_out = np.zeros(n)
    cum_exact = np.zeros(n)
    bound = drift_bound_sum(SIZE, "push_pull")  # holds per tile as per block
    for step in range(20):
        def data(r):
            values = ((i * 31 + r * 7 + step) % 17 - 8).astype(np.float32)
            values[small] /= 1000
            return values

        got = hvd.allreduce(data(RANK), name="tile/w", op=hvd.Sum,
                            compression=hvd.Compression.threelc)
        h.update(got.tobytes())
        cum_out += got
        cum_exact += np.sum([data(r).astype(np.float64) for r in range(SIZE)], axis=0)
        drift = float(np.max(np.abs(cum_out - cum_exact)))
        check(drift <= bound, lambda: f"step {step + 1}: running-sum drift {drift} exceeds "
                                      f"{bound}")
        if step == 0 and SIZE > 1:
            small_sent = int(np.count_nonzero(got[small]))
            out(f"STAT scale_tile {tile} N={SIZE}: {small_sent} small values sent on step 1")
            if tile:
                check(small_sent > 0, "with a scale per tile no small value was sent")
            else:
                check(small_sent == 0, lambda: f"with one scale per block {small_sent} small "
                                                f"values were sent")
    out(f"HASH tile/20 {h.hexdigest()[:32]}")
    hvd.shutdown()


def case_async():
    """200 tensors submitted concurrently (4 threads) in a rank-seeded random order."""
    hvd.init()
    count = 200
    specs = []
    for k in range(count):
        dtype_name = DTYPE_NAMES[k % len(DTYPE_NAMES)]
        op_name = ["sum", "average", "min", "max", "product"][(k // 8) % 5]
        shape = [(0,), (1,), (5,), (17,), (3, 33), (1000,), (4096 + k,)][k % 7]
        compressed = k % 25 == 6
        if compressed:
            dtype_name, op_name, shape = "float32", "sum", (MIN_COMPRESS_BYTES // 4 + 17 * k,)
        specs.append((k, dtype_name, op_name, shape, compressed))
    rng = np.random.default_rng(RANK + 1000)
    order = rng.permutation(count)
    handles = {}
    refs = {}
    errors = []
    lock = threading.Lock()
    for k, dtype_name, op_name, shape, compressed in specs:
        if compressed:
            vals = [ints(r, shape, -8, 8, salt=k).astype(np.float32) for r in range(SIZE)]
            refs[k] = np.sum(vals, axis=0).astype(np.float64)
        else:
            vals, refs[k] = op_data(dtype_name, op_name, shape, RANK, salt=k)
        specs[k] = specs[k] + (vals[RANK],)

    def submit(part):
        try:
            for k in part:
                _, dtype_name, op_name, shape, compressed, values = specs[k]
                mine, dt = make(dtype_name, values)
                handle = hvd.allreduce_async(
                    mine, name=f"async/{k}", op=OPS[op_name], dtype=dt,
                    compression=hvd.Compression.threelc if compressed else hvd.Compression.none)
                with lock:
                    handles[k] = handle
                if k % 3 == 0:
                    time.sleep(0.0005)
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=submit, args=(order[t::4],)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, lambda: f"submission failed: {errors[0]}")
    check(len(handles) == count, f"{len(handles)} handles for {count} submissions")
    results = {}
    for k in rng.permutation(count):
        results[int(k)] = handles[int(k)].wait(timeout=60)
    h = hashlib.sha256()
    for k, dtype_name, op_name, shape, compressed, _ in specs:
        got = results[k]
        h.update(got.tobytes())
        check(got.shape == shape, lambda: f"async/{k}: shape {got.shape}, expected {shape}")
        if compressed and SIZE > 1:
            err = float(np.max(np.abs(got.astype(np.float64) - refs[k])))
            check(err <= first_bound_sum(SIZE),
                  lambda: f"async/{k} (3lc): error {err} > bound {first_bound_sum(SIZE)}")
        else:
            expect_equal(as_float(dtype_name, got), refs[k],
                         f"async/{k} ({dtype_name} {op_name} {shape})")
    out(f"HASH async/all {h.hexdigest()[:32]}")
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
        for dtype_name in ("float32", "int64", "uint8", "bfloat16", "float16"):
            shape = (3, 4)
            mine, dt = make(dtype_name, ints(RANK, shape, 0, 100, salt=root))
            want, _ = make(dtype_name, ints(root, shape, 0, 100, salt=root))
            got = hvd.broadcast(mine, root_rank=root, name=f"bc/{root}/{dtype_name}", dtype=dt)
            expect_equal(got, want, f"broadcast {dtype_name} from root {root}")
            expect_equal(mine, make(dtype_name, ints(RANK, shape, 0, 100, salt=root))[0],
                         "broadcast must not modify its input")
    # allgather: first dimensions 3, 0, 5, 1, 2 (rank 1 contributes nothing)
    rows = [3, 0, 5, 1, 2]
    for dtype_name, tail in (("float32", (3,)), ("int8", ()), ("float64", (2, 2))):
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


def capture_fds(fn):
    """Runs fn() with file descriptors 1 and 2 redirected to a file; returns the text."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            fn()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        f.seek(0)
        return f.read().decode("utf-8", "replace")


def case_shutdown():
    """One rank submits an allreduce nobody else submits and shuts down: the handle fails
    with ESHUTDOWN and nothing hangs; init works again afterwards."""
    orphan_rank = int(sys.argv[2]) % SIZE if len(sys.argv) > 2 else SIZE - 1
    check(not hvd.is_initialized() and hvd.rank() == -1 and hvd.size() == -1,
          "before init: is_initialized/rank/size must say not initialized")
    expect_error(lambda: hvd.allreduce(np.ones(3, np.float32), name="early"), engine.ENOTINIT,
                 "allreduce before init")
    hvd.init()
    vals = [ints(r, (200,), -9, 9) for r in range(SIZE)]  # under THREELC_MIN_COMPRESS_BYTES
    got = hvd.allreduce(vals[RANK].astype(np.float32), name="sd/first", op=hvd.Sum)
    expect_equal(got, np.sum(vals, axis=0).astype(np.float32), "allreduce before shutdown")
    orphan = None
    if RANK == orphan_rank and SIZE > 1:  # with one rank nothing can stay pending
        keep = np.ones(1000, np.float32)
        orphan = hvd.allreduce_async(keep, name="sd/orphan", op=hvd.Sum)
    # every rank is still running here, and the orphan is in flight on its rank
    hvd.barrier()
    if orphan is not None:
        check(not orphan.poll(), "an allreduce only one rank submitted has finished")
    else:
        # the orphan's rank shuts down first (a shutdown elsewhere stops every rank too)
        time.sleep(0.5)
    t0 = time.monotonic()
    hvd.shutdown()
    took = time.monotonic() - t0
    check(took < 10, lambda: f"shutdown took {took:.1f} s")
    if orphan is not None:
        t0 = time.monotonic()
        expect_error(lambda: orphan.wait(timeout=10), engine.ESHUTDOWN,
                     "pending allreduce at shutdown")
        check(time.monotonic() - t0 < 5, "the pending handle did not complete at shutdown")
    check(not hvd.is_initialized() and hvd.rank() == -1,
          "after shutdown: is_initialized/rank must say not initialized")
    expect_error(lambda: hvd.allreduce(np.ones(3, np.float32), name="late"), engine.ENOTINIT,
                 "allreduce after shutdown")
    hvd.shutdown()  # a no-op when not initialized
    out(f"STAT shutdown took {took:.3f}s")
    # init again: a new job on the same coordinator address
    hvd.init()
    check(hvd.rank() == RANK and hvd.size() == SIZE,
          lambda: f"after re-init rank/size are {hvd.rank()}/{hvd.size()}")
    vals = [ints(r, (50000,), -8, 8, salt=1).astype(np.float32) for r in range(SIZE)]
    exact = np.sum(vals, axis=0)
    got = hvd.allreduce(vals[RANK], name="sd/again", op=hvd.Sum, compression=hvd.Compression.none)
    expect_equal(got, exact, "allreduce after re-init")
    got = hvd.allreduce(vals[RANK], name="sd/orphan", op=hvd.Sum)  # the orphan's name is free
    emit("sd/again/3lc", got)
    err = float(np.max(np.abs(got - exact)))
    check(err <= first_bound_sum(SIZE), lambda: f"compressed allreduce after re-init: error "
                                                f"{err} (error buffers must start afresh)")
    hvd.shutdown()


def case_bad_env():
    """Each VAR=value argument, set alone, makes init fail with a message naming VAR; then
    init with the job's own environment back (its THREELC_TRANSPORT included) works."""
    pairs = [a.split("=", 1) for a in sys.argv[2:]]
    for var, value in pairs:
        before = os.environ.get(var)  # e.g. THREELC_TRANSPORT=ucx of the job's transport
        os.environ[var] = value
        try:
            hvd.init()
        except ThreelcError as e:
            message, code = str(e), e.code
        else:
            raise Fail(f"init accepted {var}={value!r}")
        check(var in message, lambda: f"init with {var}={value!r} failed, but the message "
                                      f"does not name {var}: {message}")
        check(code == engine.EINVAL,
              lambda: f"init with {var}={value!r} failed with {engine.error_name(code)}, "
                      f"expected THREELC_EINVAL for a malformed value: {message}")
        out(f"STAT bad_env {var}={value!r}: code {code}: {message}")
        check(not hvd.is_initialized(), f"is_initialized() after a failed init ({var})")
        if before is None:
            del os.environ[var]
        else:
            os.environ[var] = before
    hvd.init()
    vals = [ints(r, (10,), -9, 9) for r in range(SIZE)]
    got = hvd.allreduce(vals[RANK].astype(np.int32), name="env/ok", op=hvd.Sum)
    expect_equal(got, np.sum(vals, axis=0).astype(np.int32), "allreduce after the failed inits")
    hvd.shutdown()


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


def case_api():
    """The binding itself: identity, argument checks, timeouts, dropped handles, in-place,
    unnamed operations, push_pull."""
    check(not hvd.is_initialized(), "initialized before init()")
    hvd.init()
    hvd.init()  # no-op
    check(hvd.is_initialized(), "not initialized after init()")
    for fn, var in ((hvd.rank, "THREELC_RANK"), (hvd.size, "THREELC_SIZE"),
                    (hvd.local_rank, "THREELC_LOCAL_RANK"), (hvd.local_size, "THREELC_LOCAL_SIZE"),
                    (hvd.cross_rank, "THREELC_CROSS_RANK"), (hvd.cross_size, "THREELC_CROSS_SIZE")):
        want = int(os.environ.get(var, "0" if "RANK" in var else "1"))
        check(fn() == want, lambda: f"{fn.__name__}() is {fn()}, {var} says {want}")
    check(threelc.rank() == RANK and threelc.engine.size() == SIZE, "package-level identity")
    check(re.fullmatch(r"\d+\.\d+\.\d+", engine.version()) is not None, "version()")
    # Python-side argument checks
    for bad, exc in ((lambda: engine.allreduce(np.zeros(4, np.uint16)), TypeError),
                     (lambda: engine.allreduce(np.zeros(4, np.complex64)), TypeError),
                     (lambda: engine.allreduce(np.zeros((4, 4), np.float32)[:, 1]), ValueError),
                     (lambda: engine.allreduce(np.zeros(4, ">f4")), TypeError),
                     (lambda: engine.allreduce(np.zeros(4, np.float32), dtype="int32"), TypeError),
                     (lambda: engine.allreduce([1.0, 2.0]), TypeError),
                     (lambda: engine.allreduce(np.zeros(4, np.float32), op=7), ValueError)):
        try:
            bad()
        except exc:
            pass
        else:
            raise Fail(f"no {exc.__name__} from a bad argument")
    # the engine's own argument checks: refused at submission (or failing the handle)
    # a CUDA tensor where none can be used (no CUDA in the build, or no device): refused with
    # the reason; a CUDA tensor in another collective: refused naming allreduce
    why = engine.cuda_unavailable_reason()
    if why:
        expect_error(lambda: engine.allreduce_device(4096, 4096, (4,), "float32", 0,
                                                     name="api/cuda"),
                     engine.EINVAL, "a CUDA tensor without a usable device", "device 0",
                     why.split(":")[0])
    t = engine._initialized_struct(engine._Tensor, "threelc_tensor_init")
    t.dtype, t.ndim, t.device = engine.DTYPES["float32"], 0, 0
    t.data = t.output = 4096
    expect_error(lambda: engine._submit("threelc_broadcast", "broadcast", None, t,
                                        engine._options(), (), lambda hid: None),
                 engine.EINVAL, "a CUDA tensor in a broadcast", "only allreduce takes CUDA tensors")
    for what, submit, code in (
            ("sparsity 3", lambda: hvd.allreduce(np.ones(20000, np.float32), name="api/s3",
                                                 compression=hvd.Compression.threelc(3.0)),
             engine.EINVAL),
            ("root_rank out of range", lambda: hvd.broadcast(np.ones(3, np.float32), SIZE + 1,
                                                              name="api/root"), engine.EINVAL),
            ("alltoall splits not summing to dim0",
             lambda: hvd.alltoall(np.ones((4, 2), np.float32), splits=[5] * SIZE,
                                  name="api/splits"), engine.EINVAL)):
        expect_error(submit, code, what)
    # numpy-level conveniences: non-contiguous input, 0-d scalars, lists, no input change
    base = ints(RANK, (6, 4), -5, 5).astype(np.float32)
    view = base[:, 1]
    ref = np.sum([ints(r, (6, 4), -5, 5) for r in range(SIZE)], axis=0)[:, 1].astype(np.float32)
    expect_equal(hvd.allreduce(view, name="api/strided", op=hvd.Sum), ref, "strided input")
    expect_equal(base, ints(RANK, (6, 4), -5, 5).astype(np.float32), "input modified")
    got = hvd.allreduce(np.float64(RANK + 1), name="api/scalar", op=hvd.Sum)
    check(np.shape(got) == () and float(got) == SIZE * (SIZE + 1) / 2,
          lambda: f"0-d allreduce gave {got!r}")
    # in place through the engine binding
    x = ints(RANK, (33,), -5, 5).astype(np.int64)
    h = engine.allreduce(x, x, name="api/inplace", op=hvd.Sum)
    result = h.wait()
    check(result is x, "in-place allreduce must return its output array")
    expect_equal(x, np.sum([ints(r, (33,), -5, 5) for r in range(SIZE)], axis=0), "in place")
    check(h.wait() is x, "a second wait() must return the same result")
    # unnamed operations, numbered alike on every rank
    for t in range(3):
        got = hvd.allreduce(np.full(5, RANK + t, np.int32), op=hvd.Sum)
        expect_equal(got, np.full(5, sum(r + t for r in range(SIZE)), np.int32), f"unnamed {t}")
    got = hvd.push_pull(np.full(7, 2.0, np.float32), name="api/pp")
    expect_equal(got, np.full(7, 2.0, np.float32), "push_pull (Average)")
    if SIZE > 1:
        # wait with a timeout: rank 1 submits 2 s late
        if RANK == 1:
            time.sleep(2.0)
            got = hvd.allreduce(np.ones(3, np.float32), name="api/late", op=hvd.Sum)
        else:
            h = hvd.allreduce_async(np.ones(3, np.float32), name="api/late", op=hvd.Sum)
            t0 = time.monotonic()
            expect_error(lambda: h.wait(timeout=0.2), engine.ETIMEOUT, "wait(timeout=0.2)")
            waited = time.monotonic() - t0
            check(0.15 <= waited < 1.5, lambda: f"wait(timeout=0.2) took {waited:.3f} s")
            check(not h.poll(), "poll() after the timeout")
            got = hvd.synchronize(h)
        expect_equal(got, np.full(3, SIZE, np.float32), "allreduce waited after a timeout")
        # a handle dropped while pending: its buffers stay alive until the engine is done
        if RANK == 0:
            h = hvd.allreduce_async(np.arange(4096, dtype=np.float32), name="api/dropped",
                                    op=hvd.Sum, compression=hvd.Compression.none)
            del h
            gc.collect()
            junk = [np.full(4096, -1.0, np.float32) for _ in range(64)]  # reuse freed memory
            check(len(junk) == 64, "allocations")
        else:
            time.sleep(0.3)
            got = hvd.allreduce(np.arange(4096, dtype=np.float32), name="api/dropped",
                                op=hvd.Sum, compression=hvd.Compression.none)
            expect_equal(got, SIZE * np.arange(4096, dtype=np.float32), "dropped handle's peer")
        hvd.barrier()
    # the same Handle from several threads
    h = hvd.allreduce_async(np.full(9, 3, np.int8), name="api/threads", op=hvd.Sum)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(h.wait(timeout=30)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(len(seen) == 4 and all(s is seen[0] for s in seen), "Handle.wait from 4 threads")
    expect_equal(seen[0], np.full(9, 3 * SIZE, np.int8), "threads' result")
    hvd.shutdown()
    check(not hvd.is_initialized() and hvd.rank() == -1, "after shutdown")


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


def case_dead_peer():
    """The last rank dies (os._exit, no shutdown) while the others wait in an allreduce: they
    get THREELC_EPEER naming it well before THREELC_TIMEOUT, and later submissions are refused
    with the same cause."""
    threelc.init()
    hvd.allreduce(np.ones(4, np.float32), name="warmup", op=engine.Sum)
    if RANK == SIZE - 1:
        time.sleep(0.5)
        os._exit(0)
    started = time.monotonic()
    expect_error(lambda: hvd.allreduce(np.ones(4, np.float32), name="x", op=engine.Sum),
                 engine.EPEER, "allreduce with a dead peer", names_rank(SIZE - 1))
    seconds = time.monotonic() - started
    check(seconds < 20, f"the error took {seconds:.1f} s")
    expect_error(lambda: hvd.allreduce(np.ones(4, np.float32), name="y", op=engine.Sum),
                 engine.EPEER, "submission after the engine stopped", names_rank(SIZE - 1))
    threelc.shutdown()


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


# Error-feedback checkpoints: tensors of at least THREELC_MIN_COMPRESS_BYTES (so compressed),
# two under the prefix "ck/" and one outside it.
CHECKPOINT_TENSORS = (("ck/a", 20_000), ("ck/b", 16_384), ("other/c", 33_333))


def parse_feedback_blob(blob):
    """(rank, size, {name: float32 array}) of a threelc_feedback_save blob, read by the layout
    docs/WIRE_FORMAT.md gives, independently of the engine's parser."""
    check(len(blob) >= 24, lambda: f"feedback blob of {len(blob)} bytes")
    magic, version, rank, size, count = struct.unpack_from("<4sIIIQ", blob, 0)
    check(magic == b"3LCF" and version == 1, lambda: f"feedback blob header {magic!r} {version}")
    at = 24
    entries = {}
    for _ in range(count):
        (length,) = struct.unpack_from("<I", blob, at)
        name = blob[at + 4:at + 4 + length].decode("utf-8")
        (n,) = struct.unpack_from("<Q", blob, at + 4 + length)
        at += 4 + length + 8
        entries[name] = np.frombuffer(blob, dtype="<f4", count=n, offset=at)
        at += 4 * n
    check(at == len(blob), lambda: f"feedback blob: {len(blob) - at} bytes after the entries")
    check(list(entries) == sorted(entries, key=lambda k: k.encode()),
          lambda: f"feedback blob entries not sorted: {list(entries)}")
    return rank, size, entries


def checkpoint_gradients(steps):
    """Per step, this rank's random gradient of every checkpoint tensor (seeded by rank)."""
    rng = np.random.default_rng(4242 + RANK)
    return [{name: rng.standard_normal(n).astype(np.float32) for name, n in CHECKPOINT_TENSORS}
            for _ in range(steps)]


def checkpoint_steps(grads):
    """Runs the steps one compressed Sum at a time (never fused: a fusion's segment cuts would
    depend on timing) and returns every result."""
    results = []
    for step in grads:
        results.append({name: hvd.allreduce(g, name=name, op=hvd.Sum,
                                            compression=hvd.Compression.threelc)
                        for name, g in step.items()})
    return results


def same_results(a, b):
    return all(np.array_equal(x[k].view(np.uint32), y[k].view(np.uint32))
               for x, y in zip(a, b) for k in x)


def case_feedback_checkpoint():
    """threelc_feedback_save / _load: K compressed steps, save, M steps recorded; a fresh
    engine starts with no residuals, refuses another rank's blob (EINVAL) and a damaged one
    (EMALFORMED, changing nothing), loads its own and replays the M steps bit for bit; without
    the load they differ; loading by prefix ("ck/", "other/") does as well as all at once."""
    k_steps, m_steps = 3, 4
    grads = checkpoint_gradients(k_steps + m_steps)
    for what, call in (("save", lambda: engine.feedback_save()),
                       ("load", lambda: engine.feedback_load(b"3LCF"))):
        expect_error(call, engine.ENOTINIT, f"feedback_{what} before init", "threelc_init")
    for bad, exc in ((lambda: engine.feedback_load("3LCF"), TypeError),
                     (lambda: engine.feedback_load(b"", prefix=b"ck/"), TypeError),
                     (lambda: engine.feedback_save("ck/\0"), ValueError)):
        try:
            bad()
        except exc:
            pass
        else:
            raise Fail(f"no {exc.__name__} from a bad feedback_save/_load argument")

    hvd.init()
    rank, size, entries = parse_feedback_blob(engine.feedback_save())
    check((rank, size, entries) == (RANK, SIZE, {}),
          lambda: f"a fresh engine saved rank {rank}, size {size}, entries {list(entries)}")
    checkpoint_steps(grads[:k_steps])
    blob = engine.feedback_save()
    by_prefix = {p: engine.feedback_save(p) for p in ("ck/", "other/")}
    rank, size, entries = parse_feedback_blob(blob)
    check((rank, size) == (RANK, SIZE), lambda: f"blob of rank {rank} of {size}")
    check({k: v.size for k, v in entries.items()} == dict(CHECKPOINT_TENSORS),
          lambda: f"blob holds {({k: v.size for k, v in entries.items()})}")
    for name, values in entries.items():
        check(np.all(np.isfinite(values)) and np.any(values != 0),
              lambda: f"residual of {name} is zero or not finite after {k_steps} steps")
    check(list(parse_feedback_blob(by_prefix["ck/"])[2]) == ["ck/a", "ck/b"],
          "feedback_save('ck/') holds other names")
    # Saves from another thread while the recorded steps run: they wait for the collective in
    # progress, every one is a whole blob, and the results are the same as without them.
    saves = []
    stop = threading.Event()

    def saver():
        while not stop.is_set():
            saves.append(parse_feedback_blob(engine.feedback_save())[2].keys())

    thread = threading.Thread(target=saver)
    thread.start()
    try:
        recorded = checkpoint_steps(grads[k_steps:])
    finally:
        stop.set()
        thread.join()
    check(saves and all(list(k) == [n for n, _ in CHECKPOINT_TENSORS] for k in saves),
          lambda: f"{len(saves)} concurrent saves, names {[list(k) for k in saves[:3]]}")
    for step, result in enumerate(recorded):
        for name, got in result.items():
            emit(f"ck/{step}/{name}", got)
    # Every rank's blob, to try another rank's.
    lengths = hvd.allgather(np.array([len(blob)], np.int64), name="ck/lengths")
    everyone = hvd.allgather(np.frombuffer(blob, np.uint8), name="ck/blobs").tobytes()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    blobs = [everyone[starts[r]:starts[r + 1]] for r in range(SIZE)]
    check(blobs[RANK] == blob, "allgather returned another blob for this rank")
    hvd.shutdown()
    expect_error(lambda: engine.feedback_save(), engine.ENOTINIT, "feedback_save after shutdown")

    # A fresh engine: no residuals; refuses another rank's blob and a damaged one.
    hvd.init()
    empty = engine.feedback_save()
    check(parse_feedback_blob(empty)[2] == {}, "a re-initialized engine kept residuals")
    other = (RANK + 1) % SIZE
    expect_error(lambda: engine.feedback_load(blobs[other]), engine.EINVAL,
                 "feedback_load of another rank's blob", f"rank {other} of a job of {SIZE}",
                 f"this is rank {RANK} of {SIZE}")
    engine.feedback_load(blob)
    check(engine.feedback_save() == blob, "save after load differs from the blob loaded")
    damaged = bytearray(blob)
    struct.pack_into("<Q", damaged, 24 + 4 + len("ck/a"), 1 << 40)  # ck/a's element count
    expect_error(lambda: engine.feedback_load(bytes(damaged)), engine.EMALFORMED,
                 "feedback_load of a damaged blob", "element count", "offset 32")
    expect_error(lambda: engine.feedback_load(blob[:-1]), engine.EMALFORMED,
                 "feedback_load of a truncated blob", "offset")
    expect_error(lambda: engine.feedback_load(blob, "ck/"), engine.EINVAL,
                 "feedback_load of names outside the prefix", "'other/c'", "prefix 'ck/'")
    check(engine.feedback_save() == blob, "a refused load changed the residuals")
    replayed = checkpoint_steps(grads[k_steps:])
    check(same_results(replayed, recorded), "the steps after loading the checkpoint differ from "
                                            "the uninterrupted run")
    hvd.shutdown()

    # Negative control: the same steps without the checkpoint give other results.
    hvd.init()
    fresh = checkpoint_steps(grads[k_steps:])
    check(not same_results(fresh, recorded), "the steps without the checkpoint were identical: "
                                             "the test cannot tell a load from none")
    hvd.shutdown()

    # By prefix: each part into its own prefix; the residuals of the run without the checkpoint
    # are replaced (under "ck/" and "other/") and the replay is bitwise again.
    hvd.init()
    checkpoint_steps(grads[:1])
    for prefix, part in by_prefix.items():
        engine.feedback_load(part, prefix)
    check(engine.feedback_save() == blob, "loading by prefix did not restore the whole blob")
    check(same_results(checkpoint_steps(grads[k_steps:]), recorded),
          "the steps after loading by prefix differ from the uninterrupted run")
    hvd.shutdown()
    out(f"STAT feedback_checkpoint rank {RANK}: blob {len(blob)} bytes, {len(saves)} "
        f"concurrent saves")


def case_hierarchical():
    """THREELC_HIERARCHICAL=1 on hosts told apart by THREELC_HOSTNAME, argv[2] ranks per host.

    One host: only the exact steps inside the host run, so a compressed sum of fused tensors
    equals the fp32 sum folded in rank order, bit for bit (the flat push_pull would quantize).
    Several hosts of equal size: 3LC runs only across hosts on the host sums, so the first
    step is not exact, and the running sum of 100 steps of an Average stays within the bound of
    push_pull (or the ring) on H ranks whose inputs are host sums of L ranks. Hosts of unequal
    size: the setting is ignored (rank 0 warns) and the bound is the flat one."""
    per_host = int(sys.argv[2])
    algorithm = os.environ.get("THREELC_ALLREDUCE", "push_pull")
    os.environ["THREELC_HOSTNAME"] = f"host{RANK // per_host}"
    os.environ["THREELC_HIERARCHICAL"] = "1"
    hosts = (SIZE + per_host - 1) // per_host
    even = SIZE % per_host == 0 and per_host > 1
    hvd.init()
    check(hvd.cross_size() == hosts and hvd.cross_rank() == RANK // per_host,
          lambda: f"cross rank/size {hvd.cross_rank()}/{hvd.cross_size()}, expected "
                  f"{RANK // per_host}/{hosts}")

    # fused tensors of awkward lengths: segments cut through them
    lengths = [1001, 7, 100_003, 3]
    data = [[ints(r, (n,), -8, 8, salt=k).astype(np.float32) for r in range(SIZE)]
            for k, n in enumerate(lengths)]
    handles = [hvd.allreduce_async(data[k][RANK], name=f"hi/{k}", op=hvd.Sum,
                                   compression=hvd.Compression.threelc)
               for k in range(len(lengths))]
    h = hashlib.sha256()
    exact = True
    for k, handle in enumerate(handles):
        got = hvd.synchronize(handle)
        folded = data[k][0].copy()
        for r in range(1, SIZE):
            folded += data[k][r]  # fp32, in rank order
        h.update(got.tobytes())
        exact = exact and np.array_equal(got, folded)
    out(f"HASH hi/fused {h.hexdigest()[:32]}")
    if hosts == 1 and even:
        check(exact, "one host: the hierarchical sum is not the exact fp32 sum in rank order")
    elif SIZE > 1:
        check(not exact, "several hosts: the sum was exact, nothing crossed hosts compressed")

    if even:
        bound = drift_bound_sum(hosts, algorithm, per_host * X) / SIZE
    else:
        bound = drift_bound_sum(SIZE, algorithm) / SIZE
    slack = 1e-2
    n = 100_003
    i = np.arange(n, dtype=np.int64)
    cum_out = np.zeros(n)
    cum_exact = np.zeros(n)
    h = hashlib.sha256()
    worst = 0.0
    for step in range(100):
        k = i * 31 + (i >> 7) + (step % 2) * 5

        def values(r):
            return ((k + r * 7919) % 17 - 8).astype(np.float32)

        got = hvd.allreduce(values(RANK), name="hi/w", op=hvd.Average,
                            compression=hvd.Compression.threelc)
        h.update(got.tobytes())
        cum_out += got
        cum_exact += np.sum([values(r).astype(np.float64) for r in range(SIZE)], axis=0) / SIZE
        drift = float(np.max(np.abs(cum_out - cum_exact)))
        worst = max(worst, drift)
        check(drift <= bound + slack,
              lambda: f"{algorithm} step {step + 1}: running-sum drift {drift} exceeds the "
                      f"bound {bound} ({hosts} hosts of {per_host})")
    out(f"HASH hi/100 {h.hexdigest()[:32]}")
    out(f"STAT hierarchical {algorithm} N={SIZE} per_host={per_host} worst {worst:.4f} "
        f"bound {bound:.4f}")
    hvd.shutdown()


CASES = {
    "sizes": case_sizes,
    "dtypes_ops": case_dtypes_ops,
    "big": case_big,
    "error_feedback": case_error_feedback,
    "scale_tile": case_scale_tile,
    "async": case_async,
    "mismatch": case_mismatch,
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
