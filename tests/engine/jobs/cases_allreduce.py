"""worker.py's allreduce cases: sizes, dtypes and ops, 50 M elements, error feedback, scale
tiles, concurrent submissions, the hierarchical allreduce."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time

import numpy as np

import threelc.numpy as hvd
from worker_checks import RANK, SIZE, check, emit, expect_equal, out
from worker_data import (DTYPE_NAMES, MIN_COMPRESS_BYTES, OPS, SCALE_TILE, X, as_float,
                         drift_bound_sum, first_bound_sum, ints, make, op_data, ulp)


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
        elif dtype_name == "int16":  # |sum| * 6 <= 30000
            lo, hi, pre, post = -(5000 // SIZE), 5000 // SIZE, 2.0, 3.0
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
