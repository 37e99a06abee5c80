"""The caller's arguments checked and turned into the C structs a submission passes
(threelc_tensor, threelc_options): arrays, names, output buffers, ops, compression."""

from __future__ import annotations

import ctypes
from typing import Optional

import numpy as np

from .abi import MAX_DIMS, _DEVICE_CPU, _initialized_struct, _Options, _Tensor
from .compression import mode_and_sparsity
from .reduce_ops import _OPS, Sum


def _array(array, what: str = "array") -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{what} must be a numpy.ndarray, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous (got strides {array.strides}); pass "
                         f"np.ascontiguousarray({what})")
    if array.ndim > MAX_DIMS:
        raise ValueError(f"{what} has {array.ndim} dimensions; the engine takes at most "
                         f"{MAX_DIMS}")
    return array


def _name_bytes(name: Optional[str]) -> Optional[bytes]:
    if name is None or name == "":
        return None
    if isinstance(name, bytes):
        raw = name
    elif isinstance(name, str):
        raw = name.encode("utf-8")
    else:
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if b"\0" in raw:
        raise ValueError(f"name {name!r} contains a NUL character")
    return raw


def _tensor(array: np.ndarray, code: int, name: Optional[bytes],
            output: Optional[np.ndarray]) -> tuple:
    t = _initialized_struct(_Tensor, "threelc_tensor_init")
    shape = (ctypes.c_int64 * max(1, array.ndim))(*array.shape)
    t.name = name
    t.dtype = code
    t.ndim = array.ndim
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.data = array.ctypes.data
    t.output = None if output is None else output.ctypes.data
    t.device = _DEVICE_CPU
    t.stream = None
    return t, shape


def _output(array: np.ndarray, output: Optional[np.ndarray]) -> np.ndarray:
    if output is None:
        return np.empty_like(array, order="C")
    output = _array(output, "output")
    if output.shape != array.shape or output.dtype != array.dtype:
        raise ValueError(f"output has shape {output.shape} and dtype {output.dtype}; expected "
                         f"{array.shape} and {array.dtype}")
    if not output.flags.writeable:
        raise ValueError("output must be writable")
    if output is not array and np.may_share_memory(array, output):
        raise ValueError("output partly overlaps the input; pass the input itself for an "
                         "in-place operation")
    return output


def _process_set_id(process_set) -> int:
    """A process set argument checked: the id (an int) that threelc_add_process_set gave; 0 is
    every rank. The engine refuses ids it does not know, naming them."""
    if isinstance(process_set, bool) or not isinstance(process_set, (int, np.integer)):
        raise TypeError(f"process_set must be a process set id (int), got {process_set!r}")
    if not 0 <= int(process_set) < 2**31:
        raise ValueError(f"process_set {process_set} is not a process set id (0 .. 2**31 - 1)")
    return int(process_set)


def _options(op=Sum, prescale: float = 1.0, postscale: float = 1.0, compression=None,
             sparsity: Optional[float] = None, root_rank: int = 0,
             splits: Optional[np.ndarray] = None, process_set=0) -> _Options:
    o = _initialized_struct(_Options, "threelc_options_init")
    if int(op) not in range(len(_OPS)):
        raise ValueError(f"op {op!r} is not one of Sum, Average, Min, Max, Product")
    o.op = int(op)
    o.prescale = float(prescale)
    o.postscale = float(postscale)
    o.compression, o.sparsity = mode_and_sparsity(compression, sparsity)
    o.root_rank = int(root_rank)
    if splits is not None:
        o.splits = splits.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        o.nsplits = int(splits.shape[0])
    o.process_set = _process_set_id(process_set)
    return o
