"""Helpers of the threelc.torch and DDP suites: rank-seeded data, references, 3LC bounds,
cross-rank checks.

Every rank can recompute what every other rank sent: data come from a torch.Generator seeded
with (test salt, rank), so the expected result of a collective is computed locally from all
ranks' inputs. Data are small integers (or halves of them) wherever a result is compared
exactly, so every float sum is exact and any difference is a fault, not rounding.
"""

from __future__ import annotations

import struct
from typing import Callable, List, Optional, Sequence

import torch

import threelc.torch as hvd

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# Broadcast, allgather and alltoall move bytes: bool travels too.
MOVE_DTYPES = DTYPES + [torch.bool]
OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product]
OP_NAMES = {int(hvd.Sum): "Sum", int(hvd.Average): "Average", int(hvd.Min): "Min",
            int(hvd.Max): "Max", int(hvd.Product): "Product"}

MIN_COMPRESS_BYTES = 1024  # THREELC_MIN_COMPRESS_BYTES default: smaller tensors go raw
X = 8.0  # data of the 3LC tests are integers in [-X, X]


def dtype_id(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def op_id(op) -> str:
    return OP_NAMES[int(op)]


def rank() -> int:
    return hvd.rank()


def size() -> int:
    return hvd.size()


def generator(salt: int, r: int) -> torch.Generator:
    return torch.Generator().manual_seed(salt * 131 + r)


def ints(salt: int, r: int, shape, lo: int, hi: int) -> torch.Tensor:
    """int64 values in [lo, hi], rank r's share of test `salt`."""
    return torch.randint(lo, hi + 1, tuple(shape), generator=generator(salt, r), dtype=torch.int64)


def value_range(dtype: torch.dtype, op, n: int):
    """(lo, hi, nonzero) such that reducing n ranks' values with `op` is exact in `dtype`
    (even after a prescale of 2 and a postscale of 2 for integers, 0.5 and 3 for floats)."""
    if int(op) == int(hvd.Product):
        return (1, 3, False) if dtype == torch.uint8 else (-3, 3, True)
    if dtype == torch.uint8:
        return 0, 60 // n, False
    if dtype == torch.int8:
        return -(30 // n), 30 // n, False
    if dtype == torch.int16:  # 4 * 8000 = 32000 <= 32767; most values beyond int8's range
        return -(8000 // n), 8000 // n, False
    if dtype == torch.bfloat16:
        return -(60 // n), 60 // n, False
    if dtype == torch.float16:
        return -(300 // n), 300 // n, False
    return -1000, 1000, False


def op_data(salt: int, shape, dtype: torch.dtype, op,
            n: Optional[int] = None) -> List[torch.Tensor]:
    """Every rank's input (in `dtype`) for reducing with `op`; index r is rank r's."""
    n = size() if n is None else n
    lo, hi, nonzero = value_range(dtype, op, n)
    out = []
    for r in range(n):
        v = ints(salt, r, shape, lo, hi)
        if nonzero:
            v = torch.where(v == 0, torch.ones_like(v), v)
        out.append(v.to(dtype))
    return out


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The type the engine computes `dtype` in (fp16 and bf16 are widened to fp32)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _scale(t: torch.Tensor, factor: float) -> torch.Tensor:
    """The engine's scale_values: floats multiply in their compute type; integers multiply
    in double and are truncated toward zero (saturated)."""
    if factor == 1.0:
        return t
    if t.dtype.is_floating_point:
        cd = compute_dtype(t.dtype)
        return (t.to(cd) * torch.tensor(factor, dtype=cd)).to(t.dtype)
    info = torch.iinfo(t.dtype)
    wide = torch.trunc(t.to(torch.float64) * factor).clamp(info.min, info.max)
    return wide.to(t.dtype)


def reduce_reference(inputs: Sequence[torch.Tensor], op, prescale: float = 1.0,
                     postscale: float = 1.0) -> torch.Tensor:
    """What an exact (uncompressed) allreduce of `inputs` (one per rank) returns: prescale,
    reduce, divide by the number of ranks for Average, postscale, all as the engine does."""
    dtype = inputs[0].dtype
    n = len(inputs)
    scaled = [_scale(t, prescale) for t in inputs]
    if dtype.is_floating_point:
        wide = torch.stack([t.to(torch.float64) for t in scaled])
    else:
        wide = torch.stack([t.to(torch.int64) for t in scaled])
    o = int(op)
    if o in (int(hvd.Sum), int(hvd.Average)):
        acc = wide.sum(0)
    elif o == int(hvd.Min):
        acc = wide.min(0).values
    elif o == int(hvd.Max):
        acc = wide.max(0).values
    else:
        acc = wide.prod(0)
    result = acc.to(dtype)  # exact: the data are chosen so that it fits
    if o == int(hvd.Average):
        if dtype.is_floating_point:
            cd = compute_dtype(dtype)
            result = (result.to(cd) / torch.tensor(n, dtype=cd)).to(dtype)
        else:
            result = torch.div(result.to(torch.int64), n, rounding_mode="trunc").to(dtype)
    return _scale(result, postscale)


def rows_of(r: int, rows: int, n: int):
    """(offset, count) of rank r's part of `rows` rows in a reducescatter."""
    base, extra = divmod(rows, n)
    count = base + (1 if r < extra else 0)
    offset = r * base + min(r, extra)
    return offset, count


def assert_same(got: torch.Tensor, expected: torch.Tensor, what: str = "") -> None:
    """Same dtype, shape and values (bitwise for floats: NaN-free data)."""
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype}, expected {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {tuple(got.shape)}, expected " \
                                        f"{tuple(expected.shape)}"
    if not torch.equal(got, expected):
        diff = (got.to(torch.float64) - expected.to(torch.float64)).abs()
        raise AssertionError(f"{what}: values differ (max |diff| {diff.max().item()} at "
                             f"{int(diff.argmax())}); got {got.flatten()[:8].tolist()}..., "
                             f"expected {expected.flatten()[:8].tolist()}...")


def gather_rows(t: torch.Tensor, name: str) -> List[torch.Tensor]:
    """Every rank's `t` (all of the same shape), via an allgather: index r is rank r's."""
    n = size()
    flat = t.detach().reshape(1, -1)
    gathered = hvd.allgather(flat, name=name)
    return [gathered[r].reshape(t.shape) for r in range(n)]


def expect_raises(exc_type, fn: Callable, *args, **kwargs):
    """Calls fn; returns the exception of type exc_type it raised (AssertionError if none)."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:  # noqa: PERF203
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {exc_type.__name__}")


def catch(fn: Callable, *args, **kwargs):
    """(result, None) or (None, the exception fn raised): for calls that must fail on every
    rank, so that a rank where it did not fail still makes the test's later collective calls
    (the assertion comes after them)."""
    try:
        return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001
        return None, e


# ------------------------------------------------------------------------ 3LC error bounds

def first_bound_sum(n: int, s: float = 1.0, x: float = X) -> float:
    """|out - exact sum| after one 3LC push_pull with fresh error buffers (sparsity s), for
    inputs bounded by x. A 3LC block quantizes to {-scale, 0, scale} with scale = s * (block
    max of |input|), so each value's error is at most scale / 2. Each of the n-1 pushes to a
    segment's owner errs by at most s x / 2 and decodes to at most s x; the owner's sum is at
    most x + (n-1) s x, and its one pull quantization errs by at most s times that over 2."""
    if n == 1:
        return 0.0
    return (n - 1) * s * x / 2 + s * (x + (n - 1) * s * x) / 2


def drift_bound_sum(n: int, s: float = 1.0, x: float = X) -> float:
    """Bound, holding at every step, on |running sum of outputs - running exact sum| under
    one name with error feedback (push_pull, sparsity s). The outputs' running sum is the
    exact running sum minus every rank's current residual at that element (residuals
    telescope). A residual E of an input bounded by I satisfies E <= (s / 2)(I + E), i.e.
    E <= s I / (2 - s); the decoded value is at most s (I + E) = 2 s I / (2 - s). Push
    residuals: (n-1) of them on inputs <= x; the owner's pull residual on an input <= x +
    (n-1) 2 s x / (2 - s)."""
    if n == 1:
        return 0.0
    e_push = s * x / (2 - s)
    decoded = 2 * s * x / (2 - s)
    owner = x + (n - 1) * decoded
    return (n - 1) * e_push + s * owner / (2 - s)


def ulp(dtype: torch.dtype, magnitude: float) -> float:
    """The spacing of `dtype` at `magnitude` (an upper bound on one rounding's error x 2)."""
    mantissa = {torch.float16: 10, torch.bfloat16: 7, torch.float32: 23, torch.float64: 52}[dtype]
    m = max(abs(magnitude), 2.0 ** -14)
    return 2.0 ** (torch.tensor(m).log2().floor().item() - mantissa)


# ------------------------------------------------------------------ error-feedback residuals

FEEDBACK = "threelc_error_feedback"  # DistributedOptimizer.state_dict()'s key of the residuals


def feedback_residuals(blob) -> dict:
    """{name: float32 residual} of an error-feedback blob (a state_dict's uint8 tensor or
    bytes; layout in docs/WIRE_FORMAT.md, "Error-feedback blob")."""
    raw = blob.numpy().tobytes() if isinstance(blob, torch.Tensor) else bytes(blob)
    magic, _version, _rank, _size, entries = struct.unpack_from("<4sIIIQ", raw, 0)
    assert magic == b"3LCF", f"not an error-feedback blob (magic {magic!r})"
    at, out = 24, {}
    for _ in range(entries):
        (length,) = struct.unpack_from("<I", raw, at)
        name = raw[at + 4:at + 4 + length].decode()
        (count,) = struct.unpack_from("<Q", raw, at + 4 + length)
        start = at + 4 + length + 8
        out[name] = torch.frombuffer(bytearray(raw[start:start + 4 * count]),
                                     dtype=torch.float32)
        at = start + 4 * count
    assert at == len(raw), f"blob of {len(raw)} bytes, entries end at {at}"
    return out


def assert_averages_within_3lc_bounds(grads: Sequence[torch.Tensor],
                                      data: Sequence[Sequence[torch.Tensor]],
                                      dtype: torch.dtype, n: int) -> None:
    """The mixed-precision suites' three steps of averaged 16- or 32-bit gradients of one name
    (`grads[step]`, every rank's input `data[step][rank]`, integers in [-X, X]): step 0 within
    one push_pull's bound of the exact average (and not exact with several ranks: it was
    compressed), step 2 within the bound error feedback keeps; each plus one rounding to
    `dtype`. Step 1 (non-finite values) is the caller's to check."""
    exact = [torch.stack(d).to(torch.float64).mean(0) for d in data]
    rounding = ulp(dtype, 2 * X)
    first = first_bound_sum(n, 1.0, X) / n * (1 + 1e-5) + rounding
    error0 = (grads[0].to(torch.float64) - exact[0]).abs().max().item()
    assert error0 <= first, f"step 0: error {error0} > bound {first}"
    if n > 1:
        assert error0 > 0, "step 0 is the exact average: nothing was compressed"
    drift = 2 * drift_bound_sum(n, 1.0, X) / n * (1 + 1e-5) + rounding
    error2 = (grads[2].to(torch.float64) - exact[2]).abs().max().item()
    assert error2 <= drift, f"step 2: error {error2} > bound {drift}"
