"""Allreduce of sparse (COO) tensors, as Horovod's ``sparse_allreduce_async``: every rank's
indices and values are allgathered (under ``<name>.indices`` and ``<name>.values``; each rank
may hold a different number of entries), and the result is the sparse tensor of all of them,
coalesced (entries at the same index summed), divided by size() for Average. Its dense form
equals the allreduce of the dense tensors. DistributedOptimizer sends sparse gradients so
unless ``sparse_as_dense=True``.
"""

from __future__ import annotations

import torch

from .. import engine as _engine
from ..engine import Average, Sum
from ._internal import allgather_parts, process_set_id
from .handles import Handle
from .process_sets import global_process_set


# The indices are checked here (_check_bounds); torch from 2.0 on warns unless told whether
# to check them again.
_UNCHECKED = {"check_invariants": False} \
    if hasattr(torch.sparse, "check_sparse_tensor_invariants") else {}


def _coo(indices, values, like) -> torch.Tensor:
    """The coalesced sparse tensor of shape like.shape (and its device) with these entries."""
    return torch.sparse_coo_tensor(indices, values, like.shape, device=like.device,
                                   **_UNCHECKED).coalesce()


def _check_bounds(indices: torch.Tensor, like: torch.Tensor, name) -> None:
    """Every rank's entries must lie inside this rank's shape (shapes differ otherwise)."""
    if indices.numel() == 0:
        return
    limits = torch.tensor(like.shape[:like.sparse_dim()], dtype=indices.dtype)
    outside = (indices >= limits).any(1).nonzero()
    if outside.numel():
        raise ValueError(f"sparse allreduce {name or '(unnamed)'}: another rank sent an entry "
                         f"at {indices[int(outside[0])].tolist()}, outside this rank's shape "
                         f"{tuple(like.shape)}: every rank's tensor must have the same shape")


class SparseHandle(Handle):
    """A sparse allreduce in flight: ``synchronize(handle)``, or calling it as Horovod's
    callable handle, ``handle()``, returns the reduced sparse tensor."""

    __slots__ = ()

    def __call__(self, timeout=None) -> torch.Tensor:
        return self.wait(timeout)


def _check(tensor, op) -> None:
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        got = type(tensor).__name__ if not isinstance(tensor, torch.Tensor) else tensor.layout
        raise TypeError(f"sparse_allreduce_async takes a sparse COO tensor, got {got} (use "
                        f"allreduce_async for a dense one)")
    if int(op) not in (int(Sum), int(Average)):
        raise ValueError(f"sparse_allreduce_async reduces with Sum or Average, not {op!r}")


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set) -> SparseHandle:
    """Submits the allreduce (op Sum or Average) of the sparse tensor `tensor`, as two
    allgathers (its indices, its values); every rank's tensor must have the same shape.
    `name` may be None (the allgathers are then numbered by the engine). In a `process_set`
    the members' entries are reduced and Average divides by the set's size."""
    set_id = process_set_id(process_set)
    _check(tensor, op)
    indices = tensor._indices().t().contiguous()  # entries along the first dimension
    values = tensor._values()
    names = [None, None] if name is None else [f"{name}.indices", f"{name}.values"]
    parts, finishes = allgather_parts([indices, values], names, process_set)
    average = int(op) == int(Average)
    members = _engine.process_set_size(set_id)

    def finish(results) -> torch.Tensor:
        all_indices, all_values = (f(r) for f, r in zip(finishes, results))
        _check_bounds(all_indices, tensor, name)
        reduced = _coo(all_indices.t(), all_values, tensor)
        if not average:
            return reduced
        summed = reduced.values()
        # as the engine averages: the sum divided by the set's size, integers truncated
        # toward zero
        mean = summed / members if summed.is_floating_point() or summed.is_complex() else \
            torch.div(summed, members, rounding_mode="trunc")
        return _coo(reduced.indices(), mean, tensor)

    return SparseHandle(parts, finish)
