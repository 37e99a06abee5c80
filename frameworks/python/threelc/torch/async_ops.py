"""The collectives as submissions, with Horovod's names, signatures and defaults: every
``*_async`` function submits to the engine and returns a :class:`Handle`; ``synchronize(handle)``
waits and returns the result (a tensor; a list for grouped operations; ``(tensor,
received_splits)`` for alltoall), ``poll(handle)`` says whether it has finished. A failed
operation raises :class:`threelc.ThreelcError` (also exported as ``HorovodInternalError``)
carrying the engine's message. Functions ending in ``_`` work in place.

Both :mod:`.ops` (the synchronous forms) and :mod:`.autograd` (their gradients) stand on
this module; it imports neither.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
import torch

from .. import engine as _engine
from ..engine import Average, Sum, ThreelcError
from . import _tensors
from .compression import Compression, check_compressor, engine_compression

HorovodInternalError = ThreelcError  # what Horovod code catches


class ProcessSet:
    """Horovod's process sets; threelc has only the global one (every rank)."""

    def __init__(self, ranks=None):
        if ranks is not None:
            raise NotImplementedError("threelc has no process sets other than the global one")

    def size(self) -> int:
        return _engine.size()

    def rank(self) -> int:
        return _engine.rank()

    def __repr__(self) -> str:
        return "ProcessSet(global)"


global_process_set = ProcessSet()


def check_process_set(process_set) -> None:
    if process_set is not None and process_set is not global_process_set:
        raise NotImplementedError("threelc runs every operation on all ranks; only "
                                  "process_set=global_process_set is supported")


def resolve_op(op, average):
    """Horovod's rules: `average` is the deprecated spelling of op; the default is Average."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return Average if op is None else op


class Handle:
    """A submitted operation: ``poll()``, ``wait(timeout=None)`` (= ``synchronize``)."""

    __slots__ = ("_parts", "_finish", "_done", "_value", "__weakref__")

    def __init__(self, parts: Sequence["_engine.Handle"], finish: Callable[[list], Any]):
        self._parts = list(parts)
        self._finish = finish
        self._done = False
        self._value = None

    def poll(self) -> bool:
        return self._done or all(p.poll() for p in self._parts)

    def wait(self, timeout: Optional[float] = None):
        if not self._done:
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            values = [p.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
                      for p in self._parts]  # raises ThreelcError
            self._value = self._finish(values)
            self._done = True
            self._finish = None
        return self._value

    def __repr__(self) -> str:
        inner = ", ".join(repr(p) for p in self._parts)
        return f"<threelc.torch.Handle [{inner}]>"


def poll(handle: Handle) -> bool:
    """True once the operation of `handle` has finished (synchronize then does not block)."""
    return handle.poll()


def synchronize(handle: Handle, timeout: Optional[float] = None):
    """Waits for `handle` and returns the operation's output; raises ThreelcError when it
    failed. `timeout` (seconds; None waits for ever) raises ThreelcError ETIMEOUT."""
    if not isinstance(handle, Handle):
        raise TypeError(f"synchronize() takes a threelc.torch handle, got {handle!r}")
    return handle.wait(timeout)


# ------------------------------------------------------------------------------ allreduce

def _allreduce_submit(tensor: torch.Tensor, in_place: bool, name: Optional[str], op,
                      prescale_factor: float, postscale_factor: float, wire,
                      cfn: str = "threelc_allreduce"):
    """(engine handle, finish) for one allreduce of `tensor`."""
    _tensors.check_tensor(tensor, reducing=True)
    if _tensors.cuda_allreduce_ready(tensor):
        work = _tensors.DeviceWork(tensor)
        out = work.work if in_place else torch.empty_like(work.work)
        inner = work.submit(out, name=name, op=op, prescale=prescale_factor,
                            postscale=postscale_factor, compression=wire, _cfn=cfn)
        return inner, (lambda _value: work.copy_back()) if in_place else (lambda _value: out)
    stage = _tensors.HostStage(tensor)
    out = stage.host if in_place else torch.empty_like(stage.host)
    array, dtype = _tensors.array_of(stage.host)
    output = array if in_place else _tensors.array_of(out)[0]
    inner = _engine.allreduce(array, output, name=name, op=op, prescale=prescale_factor,
                              postscale=postscale_factor, compression=wire, dtype=dtype, _cfn=cfn)
    keep = (tensor, out)  # the engine writes into `out` until the handle completes

    def finish(_value) -> torch.Tensor:
        assert keep  # holds the tensors until here
        return stage.copy_back() if in_place else stage.to_device(out)

    return inner, finish


def submit_with_wire(tensor, in_place, name, op, prescale_factor, postscale_factor, wire,
                     cfn="threelc_allreduce") -> Handle:
    inner, finish = _allreduce_submit(tensor, in_place, name, op, prescale_factor,
                                      postscale_factor, wire, cfn)
    return Handle([inner], lambda values: finish(values[0]))


def _allreduce_async(tensor, in_place, average, name, op, prescale_factor, postscale_factor,
                     process_set) -> Handle:
    check_process_set(process_set)
    return submit_with_wire(tensor, in_place, name, resolve_op(op, average), prescale_factor,
                            postscale_factor, _engine.Compression.none)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """Submits an allreduce of `tensor` (not modified) into a new tensor; the result comes from
    ``synchronize``. `op` defaults to Average; `prescale_factor` multiplies every rank's input,
    `postscale_factor` the result. The tensor travels raw (exact): use ``allreduce(...,
    compression=Compression.threelc)`` or DistributedOptimizer for 3LC."""
    return _allreduce_async(tensor, False, average, name, op, prescale_factor,
                            postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """In-place allreduce_async: `tensor` receives the result."""
    return _allreduce_async(tensor, True, average, name, op, prescale_factor,
                            postscale_factor, process_set)


# ---------------------------------------------------------------------- grouped allreduce

def _group_names(name: Optional[str], count: int) -> List[Optional[str]]:
    return [None] * count if not name else [f"{name}.{i}" for i in range(count)]


def grouped_submit(tensors, in_place, average, name, op, prescale_factor, postscale_factor,
                   wire) -> Handle:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped allreduce needs at least one tensor")
    op = resolve_op(op, average)
    parts, finishes = [], []
    for t, n in zip(tensors, _group_names(name, len(tensors))):
        inner, finish = _allreduce_submit(t, in_place, n, op, prescale_factor, postscale_factor,
                                          wire)
        parts.append(inner)
        finishes.append(finish)
    return Handle(parts, lambda values: [f(v) for f, v in zip(finishes, values)])


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """Submits the allreduce of every tensor in `tensors` together (fused by the engine);
    ``synchronize`` returns the list of new tensors."""
    check_process_set(process_set)
    return grouped_submit(tensors, False, average, name, op, prescale_factor, postscale_factor,
                          _engine.Compression.none)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """In-place grouped_allreduce_async."""
    check_process_set(process_set)
    return grouped_submit(tensors, True, average, name, op, prescale_factor, postscale_factor,
                          _engine.Compression.none)


# ----------------------------------------------------------------------- BytePS push_pull

def _push_pull_async(tensor, in_place, average, name, compression) -> Handle:
    check_compressor(compression)
    compressed, ctx = compression.compress(tensor)
    inner, finish = _allreduce_submit(compressed, in_place, name, Average if average else Sum,
                                      1.0, 1.0, engine_compression(compression),
                                      "threelc_push_pull")

    def done(values):
        result = compression.decompress(finish(values[0]), ctx)
        if in_place and result is not tensor:  # a compressor that made a new tensor (fp16)
            with torch.no_grad():
                tensor.copy_(result)
            return tensor
        return result

    return Handle([inner], done)


def push_pull_async(tensor, average=True, name=None, version=0, priority=0,
                    compression=Compression.none) -> Handle:
    """BytePS's push_pull_async: the sum (average=True: the mean) of `tensor` over every rank
    into a new tensor (``synchronize`` returns it). `version` and `priority` are accepted for
    BytePS compatibility and ignored (the engine orders by arrival)."""
    return _push_pull_async(tensor, False, average, name, compression)


def push_pull_async_(tensor, average=True, name=None, version=0, priority=0,
                     compression=Compression.none) -> Handle:
    """In-place push_pull_async (BytePS's push_pull_async_inplace)."""
    return _push_pull_async(tensor, True, average, name, compression)


push_pull_async_inplace = push_pull_async_


# ------------------------------------------------------------------------------ allgather

def _rows_input(tensor, what: str, reducing: bool = False):
    """(stage, numpy array, engine dtype) of a tensor whose first dimension is cut into rows."""
    _tensors.check_tensor(tensor, reducing=reducing)
    stage = _tensors.HostStage(tensor)
    if stage.host.dim() == 0:
        raise ValueError(f"{what} needs a tensor with at least one dimension (got a scalar)")
    array, dtype = _tensors.array_of(stage.host)
    return stage, array, dtype


def allgather_async(tensor, name=None, process_set=global_process_set) -> Handle:
    """Submits an allgather: every rank's `tensor` concatenated along the first dimension
    (which may differ between ranks), in rank order."""
    check_process_set(process_set)
    stage, array, dtype = _rows_input(tensor, "allgather")
    inner = _engine.allgather(array, name=_tensors.wire_name(name, tensor, "allgather"),
                              dtype=dtype)
    return Handle([inner], lambda values: stage.to_device(
        _tensors.tensor_of(values[0], tensor.dtype)))


# ------------------------------------------------------------------------------ broadcast

def _broadcast_submit(tensor, root_rank, name, in_place) -> Handle:
    _tensors.check_tensor(tensor)
    stage = _tensors.HostStage(tensor)
    out = stage.host if in_place else torch.empty_like(stage.host)
    array, dtype = _tensors.array_of(stage.host)
    output = array if in_place else _tensors.array_of(out)[0]
    inner = _engine.broadcast(array, int(root_rank), output,
                              name=_tensors.wire_name(name, tensor, "broadcast"), dtype=dtype)
    if in_place:
        return Handle([inner], lambda values: stage.copy_back())
    return Handle([inner], lambda values: stage.to_device(out))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Submits a broadcast of root_rank's `tensor` into a new tensor on every rank."""
    check_process_set(process_set)
    return _broadcast_submit(tensor, root_rank, name, False)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """In-place broadcast_async: `tensor` receives root_rank's values."""
    check_process_set(process_set)
    return _broadcast_submit(tensor, root_rank, name, True)


# ------------------------------------------------------------------------------- alltoall

def _splits_array(splits) -> Optional[np.ndarray]:
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        splits = splits.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(splits), dtype=np.int64)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set) -> Handle:
    """Submits an alltoall: rows ``splits[j]`` of `tensor`'s first dimension go to rank j
    (None: size() equal parts). ``synchronize`` returns ``(received rows in rank order,
    received_splits as an int32 tensor)``."""
    check_process_set(process_set)
    stage, array, dtype = _rows_input(tensor, "alltoall")
    inner = _engine.alltoall(array, _splits_array(splits),
                             name=_tensors.wire_name(name, tensor, "alltoall"), dtype=dtype)

    def finish(values):
        data, received = values[0]
        return (stage.to_device(_tensors.tensor_of(data, tensor.dtype)),
                torch.from_numpy(received.astype(np.int32)))

    return Handle([inner], finish)


# -------------------------------------------------------------------------- reducescatter

def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0) -> Handle:
    """Submits a reducescatter: this rank's part of the reduction (default Average) of
    `tensor`; the first dimension is cut into size() parts, the first dim0 % size() ranks
    getting one row more."""
    check_process_set(process_set)
    stage, array, dtype = _rows_input(tensor, "reducescatter", reducing=True)
    inner = _engine.reducescatter(array, name=name, op=op, prescale=prescale_factor,
                                  postscale=postscale_factor, dtype=dtype)
    return Handle([inner], lambda values: stage.to_device(
        _tensors.tensor_of(values[0], tensor.dtype)))
