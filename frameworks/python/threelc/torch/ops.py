"""Collective operations on torch tensors, with Horovod's names, signatures and defaults.

Every ``*_async`` function submits to the engine and returns a :class:`Handle`;
``synchronize(handle)`` waits and returns the result (a tensor; a list for grouped
operations; ``(tensor, received_splits)`` for alltoall), ``poll(handle)`` says whether it has
finished. A failed operation raises :class:`threelc.ThreelcError` (also exported as
``HorovodInternalError``) carrying the engine's message. Functions ending in ``_`` work in
place. The synchronous forms of allreduce, allgather, broadcast, alltoall and reducescatter,
and the grouped ones (grouped_allreduce, grouped_allgather, grouped_reducescatter), are
differentiable, as in Horovod (see :mod:`threelc.torch.autograd`). A submission under a name
this rank already has in flight raises ``DuplicateNameError`` (a ValueError) at once.

Every collective but push_pull and join takes ``process_set=`` (:class:`ProcessSet`) and runs
among its members only, in the set's terms (rank, size, member order), as in Horovod.

Operations are matched across ranks by name (per process set); unnamed ones by call order per
kind and set. Every rank
must pass a tensor of the same dtype and shape (allgather and alltoall: the first dimension
may differ) for a name; otherwise the operation fails on every rank naming the ranks and what
each sent.

This module holds the synchronous forms; the submissions (:mod:`.async_ops`), :class:`Handle`,
``poll`` and ``synchronize`` (:mod:`.handles`) are exported here too.
"""

from __future__ import annotations

from typing import List

import torch

from .. import engine as _engine
from ..engine import Average
from . import autograd
from ._internal import group_of, process_set_id, refusals, resolve_op
# The submissions and handles, also part of this module's API:
from .async_ops import (allgather_async, allreduce_async, allreduce_async_, alltoall_async,
                        broadcast_async, broadcast_async_, grouped_allgather_async,
                        grouped_allreduce_async, grouped_allreduce_async_,
                        grouped_reducescatter_async, push_pull_async, push_pull_async_,
                        push_pull_async_inplace, reducescatter_async)
from .compression import Compression, check_compressor, engine_compression
from .errors import DuplicateNameError, HorovodInternalError
from .handles import Handle, poll, synchronize
from .process_sets import ProcessSet, global_process_set


# ------------------------------------------------------------------------------ allreduce

def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set) -> torch.Tensor:
    """The reduction (default Average) of `tensor` over every rank, as a new tensor.

    `compression`: Compression.none (exact, the default as in Horovod), Compression.fp16, or
    Compression.threelc / Compression.threelc(sparsity=s) for the engine's 3LC allreduce with
    error feedback kept under `name` (give a gradient the same name every step).
    Differentiable: the gradient is the same allreduce of the incoming gradient.
    """
    process_set_id(process_set)
    check_compressor(compression)
    op = resolve_op(op, average)
    compressed, ctx = compression.compress(tensor)
    reduced = autograd.AllreduceFn.apply(compressed, name, op, prescale_factor,
                                         postscale_factor, engine_compression(compression),
                                         process_set)
    return compression.decompress(reduced, ctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set) -> torch.Tensor:
    """In-place allreduce; returns `tensor`."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


# ---------------------------------------------------------------------- grouped allreduce

def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set) -> List[torch.Tensor]:
    """The allreduce of every tensor in `tensors`, submitted together; a list of new tensors.
    Differentiable."""
    process_set_id(process_set)
    check_compressor(compression)
    op = resolve_op(op, average)
    pairs = [compression.compress(t) for t in group_of(tensors, "grouped allreduce")]
    reduced = autograd.GroupedAllreduceFn.apply(name, op, prescale_factor, postscale_factor,
                                                engine_compression(compression), process_set,
                                                *[c for c, _ in pairs])
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set) -> List[torch.Tensor]:
    """In-place grouped allreduce; returns `tensors`."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ----------------------------------------------------------------------- BytePS push_pull

def push_pull(tensor, average=True, name=None, version=0, priority=0,
              compression=Compression.none) -> torch.Tensor:
    """BytePS's push_pull, an alias of allreduce under BytePS's signature: a new tensor with
    the sum (average=True: mean) over every rank. Like BytePS it defaults to no compression;
    ``compression=Compression.threelc`` sends it through the engine's 3LC allreduce (the
    push_pull algorithm unless THREELC_ALLREDUCE says ring)."""
    return synchronize(push_pull_async(tensor, average, name, version, priority, compression))


def push_pull_(tensor, average=True, name=None, version=0, priority=0,
               compression=Compression.none) -> torch.Tensor:
    """In-place push_pull; returns `tensor`."""
    return synchronize(push_pull_async_(tensor, average, name, version, priority, compression))


push_pull_inplace = push_pull_


# ------------------------------------------------------------------------------ allgather

def allgather(tensor, name=None, process_set=global_process_set) -> torch.Tensor:
    """Every rank's `tensor` concatenated along dimension 0 in rank order. Differentiable, as
    in Horovod: the gradient is this rank's rows of the mean of every rank's incoming
    gradient."""
    process_set_id(process_set)
    return autograd.AllgatherFn.apply(tensor, name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set) -> List[torch.Tensor]:
    """The allgather of every tensor in `tensors`, submitted together; a list of new tensors.
    Differentiable, as allgather."""
    process_set_id(process_set)
    tensors = group_of(tensors, "grouped allgather")
    return list(autograd.GroupedAllgatherFn.apply(name, process_set, *tensors))


# ------------------------------------------------------------------------------ broadcast

def broadcast(tensor, root_rank, name=None, process_set=global_process_set) -> torch.Tensor:
    """root_rank's `tensor`, as a new tensor on every rank. Differentiable, as in Horovod: the
    gradient is the mean of every rank's incoming gradient on the root, zero elsewhere."""
    process_set_id(process_set)
    return autograd.BroadcastFn.apply(tensor, int(root_rank), name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set) -> torch.Tensor:
    """In-place broadcast; returns `tensor`."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ------------------------------------------------------------------------------- alltoall

def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of `tensor` to every rank and gathers what they send here. Returns the
    received rows (in rank order) and, when `splits` was given, also the received splits
    (an int32 tensor), as Horovod does. Differentiable."""
    process_set_id(process_set)
    output, received = autograd.AlltoallFn.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


# -------------------------------------------------------------------------- reducescatter

def _check_reducescatter_compression(compression) -> None:
    check_compressor(compression)
    if engine_compression(compression).mode != _engine.Compression.none.mode:
        raise ValueError(f"reducescatter does not take {compression!r}: the engine compresses "
                         f"allreduce only (use Compression.none or Compression.fp16)")


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0) -> torch.Tensor:
    """This rank's part of the reduction of `tensor` (see reducescatter_async).
    Differentiable, as in Horovod: the gradient is the allgather of the incoming gradients
    times prescale * postscale, and times size() for Sum."""
    process_set_id(process_set)
    _check_reducescatter_compression(compression)
    compressed, ctx = compression.compress(tensor)
    reduced = autograd.ReducescatterFn.apply(compressed, name, op, prescale_factor,
                                             postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0) -> List[torch.Tensor]:
    """The reducescatter of every tensor in `tensors`, submitted together; a list of this
    rank's parts. Differentiable, as reducescatter."""
    process_set_id(process_set)
    _check_reducescatter_compression(compression)
    pairs = [compression.compress(t) for t in group_of(tensors, "grouped reducescatter")]
    reduced = autograd.GroupedReducescatterFn.apply(name, op, prescale_factor, postscale_factor,
                                                    process_set, *[c for c, _ in pairs])
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(reduced, pairs)]


# -------------------------------------------------------------------------- barrier, join

def barrier(process_set=global_process_set) -> None:
    """Returns once every rank (of `process_set`) has called barrier()."""
    set_id = process_set_id(process_set)
    with refusals():
        handle = _engine.barrier(set_id)
    handle.wait()


def join(device=-1) -> int:
    """This rank has no more data: until every rank has joined it takes part in the others'
    allreduces with the op's identity (allgathers with no rows). Returns the rank that joined
    last. `device` is accepted for Horovod compatibility. Join is global, as in Horovod: it
    takes no process set."""
    return int(_engine.join().wait())
