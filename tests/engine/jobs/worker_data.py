"""The cases' data and references: deterministic rank-seeded integers, dtypes (bf16 as bit
patterns), the exact references of every op, and 3LC's error bounds.

Data are small integers wherever results are compared exactly, so every float sum is exact
and any difference is a fault, not rounding.
"""

from __future__ import annotations

import numpy as np

import threelc.numpy as hvd
from worker_checks import SIZE


MIN_COMPRESS_BYTES = 1024  # THREELC_MIN_COMPRESS_BYTES default
SCALE_TILE = 320  # THREELC_SCALE_TILE default
X = 8.0  # data of the compressed cases are integers in [-X, X]


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


DTYPE_NAMES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
               "float64"]


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
    """|out - exact sum| after one compressed allreduce with fresh residuals (push_pull,
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
        lo, hi = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-32768, 32767),
                  "float16": (-2000, 2000),
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
