"""The submissions: one function per collective of the C ABI (allreduce, push_pull,
broadcast, allgather, reducescatter, alltoall, barrier, join), each returning a
:class:`~threelc.engine.Handle`, and flush.

Every collective but join takes ``process_set``: the id of the process set it runs in
(:func:`threelc.engine.add_process_set`; 0, the default, is every rank). Only its members may
submit it; rank, size, splits and the result's rows are the set's (member i is its i-th lowest
job rank); broadcast's root_rank stays a job rank, which must be a member."""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional, Sequence

import numpy as np

from ..dtypes import DTYPES, DTypeLike, dtype_code
from .abi import _check, _fn, _initialized_struct, _Tensor, last_error
from .arguments import _array, _name_bytes, _options, _output, _process_set_id, _tensor
from .errors import EINTERNAL, ThreelcError, error_name
from .handles import Handle, _reap_orphans
from .reduce_ops import Sum
from .results import _engine_result, _result

__all__ = [
    "allreduce", "allreduce_device", "push_pull", "broadcast", "allgather", "reducescatter",
    "alltoall", "barrier", "flush", "join",
]


def _submit_call(cfn: str, args: tuple, kind: str, name: Optional[str], keep: tuple,
                 finish: Callable[[int], Any]) -> Handle:
    """Calls the submission `cfn` with `args`; its handle, or ThreelcError with the refusal."""
    _reap_orphans()
    hid = _fn(cfn)(*args)
    if hid <= 0:
        message = last_error() or f"{kind} was refused with {error_name(int(hid))}"
        raise ThreelcError(message, int(hid) if hid < 0 else EINTERNAL)
    return Handle(hid, kind, name, keep, finish)


def _submit(cfn: str, kind: str, name: Optional[str], tensor, options, keep: tuple,
            finish: Callable[[int], Any]) -> Handle:
    args = () if tensor is None else (ctypes.byref(tensor), ctypes.byref(options))
    # The structs themselves are read at submission only, but keeping them costs nothing.
    return _submit_call(cfn, args, kind, name, keep + (tensor, options), finish)


# The C ABI's two entries of the one allreduce operation, by the name the handle's messages
# use: threelc_push_pull is an alias of threelc_allreduce (BytePS's name for it).
_ALLREDUCE_ENTRIES = {"allreduce": "threelc_allreduce", "push_pull": "threelc_push_pull"}


def allreduce(array: np.ndarray, output: Optional[np.ndarray] = None, *,
              name: Optional[str] = None, op=Sum, prescale: float = 1.0,
              postscale: float = 1.0, compression=None, sparsity: Optional[float] = None,
              dtype: DTypeLike = None, process_set: int = 0) -> Handle:
    """Submits an allreduce of `array` into `output` (a new array when None; may be `array`
    itself). ``wait()`` returns the output array.

    `op` defaults to Sum here (the C default); :func:`threelc.numpy.allreduce` follows
    Horovod with Average. `compression` is a Compression member (None: Compression.default);
    `sparsity` overrides its sparsity.
    """
    return _host_allreduce("allreduce", array, output, name=name, op=op, prescale=prescale,
                           postscale=postscale, compression=compression, sparsity=sparsity,
                           dtype=dtype, process_set=process_set)


def push_pull(array: np.ndarray, output: Optional[np.ndarray] = None, **kwargs) -> Handle:
    """An alias of :func:`allreduce` (threelc_push_pull), for BytePS's name: the same operation,
    run by whichever algorithm :func:`allreduce` would use (THREELC_ALLREDUCE when compressed)."""
    return _host_allreduce("push_pull", array, output, **kwargs)


def _host_allreduce(kind: str, array: np.ndarray, output: Optional[np.ndarray], *,
                    name: Optional[str] = None, op=Sum, prescale: float = 1.0,
                    postscale: float = 1.0, compression=None,
                    sparsity: Optional[float] = None, dtype: DTypeLike = None,
                    process_set: int = 0) -> Handle:
    array = _array(array)
    code = dtype_code(array, dtype)
    out = _output(array, output)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, out)
    options = _options(op=op, prescale=prescale, postscale=postscale, compression=compression,
                       sparsity=sparsity, process_set=process_set)
    return _submit(_ALLREDUCE_ENTRIES[kind], kind, name, tensor, options,
                   (array, out, shape, raw_name), lambda hid: out)


def allreduce_device(data: int, output: int, shape: Sequence[int], dtype: str, device: int,
                     stream: int = 0, *, name: Optional[str] = None, op=Sum,
                     prescale: float = 1.0, postscale: float = 1.0, compression=None,
                     sparsity: Optional[float] = None, keep: tuple = (),
                     process_set: int = 0) -> Handle:
    """Submits an allreduce of a dense tensor in CUDA device memory: `data` and `output`
    (device pointers; output may equal data) of `shape` and engine dtype name `dtype`, on
    CUDA device `device`, ready on `stream` (a cudaStream_t as int; 0: the legacy default
    stream). `keep` holds whatever owns the memory until the handle completes; ``wait()``
    returns None once the output is written. Only compressed blocks cross PCIe when 3LC is
    used (docs/ARCHITECTURE.md)."""
    if dtype not in DTYPES:
        raise TypeError(f"dtype {dtype!r} is not one the engine reduces; expected one of "
                        f"{', '.join(DTYPES)}")
    dims = [int(d) for d in shape]
    raw_name = _name_bytes(name)
    t = _initialized_struct(_Tensor, "threelc_tensor_init")
    shape_array = (ctypes.c_int64 * max(1, len(dims)))(*dims)
    t.name = raw_name
    t.dtype = DTYPES[dtype]
    t.ndim = len(dims)
    t.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    t.data = int(data)
    t.output = int(output)
    t.device = int(device)
    t.stream = int(stream) or None
    options = _options(op=op, prescale=prescale, postscale=postscale, compression=compression,
                       sparsity=sparsity, process_set=process_set)
    return _submit("threelc_allreduce", "allreduce", name, t, options,
                   tuple(keep) + (shape_array, raw_name), lambda hid: None)


def broadcast(array: np.ndarray, root_rank: int, output: Optional[np.ndarray] = None, *,
              name: Optional[str] = None, dtype: DTypeLike = None,
              process_set: int = 0) -> Handle:
    """Submits a broadcast of root_rank's `array` (a job rank, a member of `process_set`);
    ``wait()`` returns the output array."""
    array = _array(array)
    code = dtype_code(array, dtype)
    out = _output(array, output)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, out)
    options = _options(root_rank=root_rank, process_set=process_set)
    return _submit("threelc_broadcast", "broadcast", name, tensor, options,
                   (array, out, shape, raw_name), lambda hid: out)


def allgather(array: np.ndarray, *, name: Optional[str] = None,
              dtype: DTypeLike = None, process_set: int = 0) -> Handle:
    """Submits an allgather: every member's `array` concatenated along the first dimension
    (whose length may differ between ranks), in member order. ``wait()`` returns a new
    array."""
    array = _array(array)
    code = dtype_code(array, dtype)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, None)
    options = _options(process_set=process_set)
    return _submit("threelc_allgather", "allgather", name, tensor, options,
                   (array, shape, raw_name), _engine_result(array, code))


def reducescatter(array: np.ndarray, *, name: Optional[str] = None, op=Sum,
                  prescale: float = 1.0, postscale: float = 1.0,
                  dtype: DTypeLike = None, process_set: int = 0) -> Handle:
    """Submits a reducescatter: the reduction of `array` over the members, of which member r
    gets the r-th part of the first dimension (the first dim0 % size members one row more).
    ``wait()`` returns a new array."""
    array = _array(array)
    code = dtype_code(array, dtype)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, None)
    options = _options(op=op, prescale=prescale, postscale=postscale, process_set=process_set)
    return _submit("threelc_reducescatter", "reducescatter", name, tensor, options,
                   (array, shape, raw_name), _engine_result(array, code))


def alltoall(array: np.ndarray, splits: Optional[Sequence[int]] = None, *,
             name: Optional[str] = None, dtype: DTypeLike = None,
             process_set: int = 0) -> Handle:
    """Submits an alltoall: rows ``splits[j]`` of the first dimension go to member j (None:
    equal parts). ``wait()`` returns ``(received rows in member order, received_splits)``."""
    array = _array(array)
    code = dtype_code(array, dtype)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, None)
    split_array = None
    if splits is not None:
        split_array = np.ascontiguousarray(np.asarray(splits), dtype=np.int64)
        if split_array.ndim != 1:
            raise ValueError(f"splits must be 1-D, got shape {split_array.shape}")
    options = _options(splits=split_array, process_set=process_set)
    as_array = _engine_result(array, code)

    def finish(hid: int):
        r = _result(hid)
        data = as_array(hid)
        if r.nsplits < 0 or (r.nsplits and not r.received_splits):
            raise ThreelcError("engine returned no received splits for an alltoall", EINTERNAL)
        received = np.array([r.received_splits[i] for i in range(r.nsplits)], dtype=np.int64)
        return data, received

    return _submit("threelc_alltoall", "alltoall", name, tensor, options,
                   (array, shape, raw_name, split_array), finish)


def barrier(process_set: int = 0) -> Handle:
    """Submits a barrier among the members of `process_set` (0: every rank); ``wait()``
    returns None once every member has submitted one."""
    return _submit_call("threelc_barrier_set", (_process_set_id(process_set),), "barrier", None,
                        (), lambda hid: None)


def flush() -> None:
    """A hint that what this rank has submitted is all it will submit for now: the engine
    negotiates it at once instead of at its next cycle (THREELC_CYCLE_TIME_MS)."""
    _check(_fn("threelc_flush")(), "threelc_flush")


def join() -> Handle:
    """Submits a join (this rank has no more data); ``wait()`` returns the last rank to
    join once every rank has joined."""
    return _submit("threelc_join", "join", None, None, None, (),
                   lambda hid: int(_result(hid).last_joined_rank))
