"""What a finished operation produced (threelc_handle_result), copied out of engine memory
into numpy arrays."""

from __future__ import annotations

import ctypes

import numpy as np

from .abi import MAX_DIMS, _fn, _Result, last_error
from .errors import EINTERNAL, ThreelcError, error_name


def _result(hid: int) -> _Result:
    r = _Result()
    rc = _fn("threelc_handle_result")(hid, ctypes.byref(r))
    if rc < 0:
        raise ThreelcError(last_error() or f"threelc_handle_result failed with "
                           f"{error_name(rc)}", rc)
    return r


def _result_array(r: _Result, np_dtype: np.dtype) -> np.ndarray:
    """A copy of the engine-owned result tensor, with the caller's numpy dtype."""
    if not 0 <= r.ndim <= MAX_DIMS:
        raise ThreelcError(f"engine returned a result with ndim {r.ndim}", EINTERNAL)
    shape = tuple(int(r.shape[i]) for i in range(r.ndim))
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    expected = count * np_dtype.itemsize
    if int(r.bytes) != expected:
        raise ThreelcError(f"engine returned {r.bytes} bytes for a result of shape {shape} "
                           f"and itemsize {np_dtype.itemsize} ({expected} bytes)", EINTERNAL)
    out = np.empty(shape, dtype=np_dtype)
    if expected:
        ctypes.memmove(out.ctypes.data, r.data, expected)
    return out


def _engine_result(array: np.ndarray, code: int):
    np_dtype = array.dtype

    def finish(hid: int) -> np.ndarray:
        r = _result(hid)
        if r.dtype != code:
            raise ThreelcError(f"engine returned dtype {r.dtype} for a tensor of dtype {code}",
                               EINTERNAL)
        return _result_array(r, np_dtype)

    return finish
