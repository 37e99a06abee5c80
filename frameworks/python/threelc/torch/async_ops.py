"""The collectives as submissions, with Horovod's names, signatures and defaults: every
``*_async`` function submits to the engine and returns a :class:`~.handles.Handle`;
``synchronize(handle)`` waits and returns the result (a tensor; a list for grouped operations;
``(tensor, received_splits)`` for alltoall), ``poll(handle)`` says whether it has finished. A
failed operation raises :class:`threelc.ThreelcError` (also exported as
``HorovodInternalError``) carrying the engine's message; a submission under a name this rank
already has in flight raises :class:`~.errors.DuplicateNameError` at once (a ValueError, as in
Horovod). Functions ending in ``_`` work in place. A grouped operation is its tensors'
operations, submitted one after the other once every tensor has passed the checks and waited
for together. Every collective but BytePS's push_pull takes ``process_set=`` (a registered
:class:`~.process_sets.ProcessSet`, by default ``global_process_set``) and runs among its
members, in its terms.

Both :mod:`.ops` (the synchronous forms) and :mod:`.autograd` (their gradients) stand on
this module; it imports neither. The errors, process sets, handles and Adasum are their own
modules' (:mod:`.errors`, :mod:`.process_sets`, :mod:`.handles`, :mod:`.adasum`), importable
from here too, as before.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from .. import engine as _engine
from ..engine import Average, Sum
from . import _internal, _tensors
from ._internal import process_set_id, refusals
from .adasum import Adasum
from .compression import Compression, check_compressor, engine_compression
from .errors import DuplicateNameError, HorovodInternalError, InvalidArgumentError
from .handles import Handle, poll, synchronize
from .process_sets import ProcessSet, global_process_set

__all__ = [
    "allreduce_async", "allreduce_async_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "push_pull_async", "push_pull_async_", "push_pull_async_inplace", "allgather_async",
    "grouped_allgather_async", "broadcast_async", "broadcast_async_", "alltoall_async",
    "reducescatter_async", "grouped_reducescatter_async",
    # their own modules' names, importable from here as before the split
    "Adasum", "DuplicateNameError", "Handle", "HorovodInternalError", "InvalidArgumentError",
    "ProcessSet", "global_process_set", "poll", "synchronize",
]


# ------------------------------------------------------------------------------ allreduce

def _allreduce_async(tensor, in_place, average, name, op, prescale_factor, postscale_factor,
                     process_set) -> Handle:
    return _internal.submit_with_wire(tensor, in_place, name, _internal.resolve_op(op, average),
                                      prescale_factor, postscale_factor,
                                      _engine.Compression.none, process_set)


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

def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """Submits the allreduce of every tensor in `tensors` together (fused by the engine);
    ``synchronize`` returns the list of new tensors."""
    return _internal.grouped_submit(tensors, False, average, name, op, prescale_factor,
                                    postscale_factor, _engine.Compression.none, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """In-place grouped_allreduce_async."""
    return _internal.grouped_submit(tensors, True, average, name, op, prescale_factor,
                                    postscale_factor, _engine.Compression.none, process_set)


# ----------------------------------------------------------------------- BytePS push_pull

def _push_pull_async(tensor, in_place, average, name, compression) -> Handle:
    """BytePS's push_pull is an alias of the engine's allreduce (threelc_push_pull), in the
    global set."""
    check_compressor(compression)
    compressed, ctx = compression.compress(tensor)
    inner, finish = _internal.allreduce_part(compressed, in_place, name,
                                             Average if average else Sum, 1.0, 1.0,
                                             engine_compression(compression))

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
    """BytePS's push_pull_async, an alias of allreduce under BytePS's signature: the sum
    (average=True: the mean) of `tensor` over every rank into a new tensor (``synchronize``
    returns it). `version` and `priority` are accepted for BytePS compatibility and ignored
    (the engine orders by arrival)."""
    return _push_pull_async(tensor, False, average, name, compression)


def push_pull_async_(tensor, average=True, name=None, version=0, priority=0,
                     compression=Compression.none) -> Handle:
    """In-place push_pull_async (BytePS's push_pull_async_inplace)."""
    return _push_pull_async(tensor, True, average, name, compression)


push_pull_async_inplace = push_pull_async_


# ------------------------------------------------------------------------------ allgather

def allgather_async(tensor, name=None, process_set=global_process_set) -> Handle:
    """Submits an allgather: every rank's `tensor` concatenated along the first dimension
    (which may differ between ranks), in rank order (of the set's members)."""
    parts, finishes = _internal.allgather_parts([tensor], [name], process_set)
    return Handle(parts, lambda values: finishes[0](values[0]))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set) -> Handle:
    """Submits the allgather of every tensor in `tensors` (tensor i under ``name.i``; unnamed:
    numbered by the engine), one after the other once all have passed the checks;
    ``synchronize`` returns the list of gathered tensors."""
    process_set_id(process_set)
    tensors = _internal.group_of(tensors, "grouped allgather")
    return _internal.group_handle(*_internal.allgather_parts(
        tensors, _internal.group_names(name, len(tensors)), process_set))


# ------------------------------------------------------------------------------ broadcast

def _broadcast_submit(tensor, root_rank, name, in_place, process_set) -> Handle:
    set_id = process_set_id(process_set)
    _tensors.check_tensor(tensor)
    stage = _tensors.HostStage(tensor)
    out = stage.host if in_place else torch.empty_like(stage.host)
    array, dtype = _tensors.array_of(stage.host)
    output = array if in_place else _tensors.array_of(out)[0]
    with refusals():
        inner = _engine.broadcast(array, int(root_rank), output, name=name, dtype=dtype,
                                  process_set=set_id)
    if in_place:
        return Handle([inner], lambda values: stage.copy_back())
    return Handle([inner], lambda values: stage.to_device(out))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Submits a broadcast of root_rank's `tensor` into a new tensor on every rank (of
    `process_set`; root_rank is a job rank, a member of it)."""
    return _broadcast_submit(tensor, root_rank, name, False, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """In-place broadcast_async: `tensor` receives root_rank's values."""
    return _broadcast_submit(tensor, root_rank, name, True, process_set)


# ------------------------------------------------------------------------------- alltoall

def _splits_array(splits) -> Optional[np.ndarray]:
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise ValueError(f"alltoall: splits must hold integers (Horovod's are int32), got a "
                             f"tensor of {splits.dtype}")
        splits = splits.detach().cpu().numpy()
    array = np.asarray(splits)
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"alltoall: splits must hold integers, got {array.dtype} values")
    return np.ascontiguousarray(array, dtype=np.int64)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set) -> Handle:
    """Submits an alltoall: rows ``splits[j]`` of `tensor`'s first dimension go to rank j
    (None: size() equal parts). ``synchronize`` returns ``(received rows in rank order,
    received_splits as an int32 tensor)``."""
    set_id = process_set_id(process_set)
    stage, array, dtype = _internal.rows_input(tensor, "alltoall")
    with refusals():
        inner = _engine.alltoall(array, _splits_array(splits), name=name, dtype=dtype,
                                 process_set=set_id)

    def finish(values):
        data, received = values[0]
        return (stage.to_device(_tensors.tensor_of(data, tensor.dtype)),
                torch.from_numpy(received.astype(np.int32)))

    return Handle([inner], finish)


# -------------------------------------------------------------------------- reducescatter

def _reducescatter_parts(tensors, names, op, prescale_factor, postscale_factor, process_set):
    """(engine handles, finishes) of the reducescatters of `tensors` in `process_set`, all
    checked first."""
    set_id = process_set_id(process_set)
    _internal.check_op(op)
    staged = [_internal.rows_input(t, "reducescatter", reducing=True) for t in tensors]
    parts, finishes = [], []
    for t, n, (stage, array, dtype) in zip(tensors, names, staged):
        with refusals():
            parts.append(_engine.reducescatter(array, name=n, op=op, prescale=prescale_factor,
                                               postscale=postscale_factor, dtype=dtype,
                                               process_set=set_id))
        finishes.append(_internal.result_on_device(stage, t.dtype))
    return parts, finishes


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0) -> Handle:
    """Submits a reducescatter: this rank's part of the reduction (default Average) of
    `tensor`; the first dimension is cut into size() parts, the first dim0 % size() ranks
    getting one row more."""
    parts, finishes = _reducescatter_parts([tensor], [name], op, prescale_factor,
                                           postscale_factor, process_set)
    return Handle(parts, lambda values: finishes[0](values[0]))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0) -> Handle:
    """Submits the reducescatter of every tensor in `tensors` (as grouped_allgather_async
    does); ``synchronize`` returns the list of this rank's parts."""
    process_set_id(process_set)
    tensors = _internal.group_of(tensors, "grouped reducescatter")
    return _internal.group_handle(*_reducescatter_parts(
        tensors, _internal.group_names(name, len(tensors)), op, prescale_factor,
        postscale_factor, process_set))
