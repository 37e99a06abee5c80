"""The differentiable forms of the collectives (torch.autograd.Function), with Horovod's
gradients (horovod.torch's conventions, scaling included).

Backward passes (every rank runs them, in the same order, as its backward pass reaches them;
each runs its collectives on the forward's process set):

- allreduce: the same allreduce (op, prescale, postscale) of the incoming gradient; Min, Max
  and Product have no gradient here (backward raises, where Horovod would return a wrong one);
- allgather: the average over the ranks of the incoming gradients, this rank's rows of it;
- broadcast: the average over the ranks of the incoming gradients on the root rank, that
  average times 0 elsewhere (zeros, where every gradient is finite);
- alltoall: the alltoall of the incoming gradient back along the received splits;
- reducescatter: the allgather of the incoming gradients times prescale * postscale, and times
  size() for Sum (not divided for Average); Min, Max and Product raise as for allreduce;
- grouped allreduce, allgather and reducescatter: the ungrouped gradient of every tensor of
  the group, the group's collectives submitted together.

In terms of every rank's loss L_r: allreduce and alltoall give the gradient of sum_r L_r,
allgather and broadcast that of its mean (1/size() of it), reducescatter size() times it.
The backward passes run the differentiable forms, so a graph made with create_graph=True goes
on through them (second derivatives), as in Horovod.
"""

from __future__ import annotations

import torch

from .. import engine as _engine
from ..engine import Average, Sum
from ._internal import grouped_submit, submit_with_wire
from .async_ops import (allgather_async, alltoall_async, broadcast_async,
                        grouped_allgather_async, grouped_reducescatter_async,
                        reducescatter_async)
from .handles import synchronize

_EXACT = _engine.Compression.none  # gradients travel exact, as in Horovod


def _linear(op, what: str) -> None:
    if int(op) not in (int(Sum), int(Average)):
        raise NotImplementedError(f"the gradient of {what} with {op!r} is not implemented: only "
                                  f"Sum and Average are differentiable")


def _keep_scales(ctx, op, prescale_factor, postscale_factor, process_set) -> None:
    ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
    ctx.process_set = process_set


def _offset(counts, process_set) -> torch.Tensor:
    """Where this rank's rows start: the sum of the counts (one row per rank) before it."""
    return counts[: process_set.rank()].sum(0)


def _scattered_gradient(ctx, grad: torch.Tensor) -> torch.Tensor:
    """A reducescatter's incoming gradient, scaled as Horovod scales it before the allgather:
    times size() for Sum, then prescale, then postscale."""
    if int(ctx.op) == int(Sum):
        grad = grad * ctx.process_set.size()
    if ctx.prescale != 1.0:
        grad = grad * ctx.prescale
    if ctx.postscale != 1.0:
        grad = grad * ctx.postscale
    return grad


class AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, wire, process_set):
        _keep_scales(ctx, op, prescale_factor, postscale_factor, process_set)
        return synchronize(submit_with_wire(tensor, False, name, op, prescale_factor,
                                            postscale_factor, wire, process_set=process_set))

    @staticmethod
    def backward(ctx, grad_output):
        _linear(ctx.op, "allreduce")
        grad = AllreduceFn.apply(grad_output.contiguous(), None, ctx.op, ctx.prescale,
                                 ctx.postscale, _EXACT, ctx.process_set)
        return grad, None, None, None, None, None, None


class GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, wire, process_set, *tensors):
        _keep_scales(ctx, op, prescale_factor, postscale_factor, process_set)
        handle = grouped_submit(tensors, False, None, name, op, prescale_factor,
                                postscale_factor, wire, process_set)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grad_outputs):
        _linear(ctx.op, "grouped_allreduce")
        grads = GroupedAllreduceFn.apply(None, ctx.op, ctx.prescale, ctx.postscale, _EXACT,
                                         ctx.process_set,
                                         *[g.contiguous() for g in grad_outputs])
        return (None, None, None, None, None, None, *grads)


class AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 0
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        averaged = AllreduceFn.apply(grad_output.contiguous(), None, Average, 1.0, 1.0, _EXACT,
                                     ps)
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                           process_set=ps))
        return averaged.narrow(0, int(_offset(rows, ps)), ctx.rows), None, None


class GroupedAllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 0 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(tensors, name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        ps = ctx.process_set
        averaged = GroupedAllreduceFn.apply(None, Average, 1.0, 1.0, _EXACT, ps,
                                            *[g.contiguous() for g in grad_outputs])
        # (size(), group) row counts
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                           process_set=ps))
        offsets = _offset(rows, ps).tolist()
        return (None, None,
                *[a.narrow(0, int(o), n) for a, o, n in zip(averaged, offsets, ctx.rows)])


class BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        averaged = AllreduceFn.apply(grad_output.contiguous(), None, Average, 1.0, 1.0, _EXACT,
                                     ctx.process_set)
        if _engine.rank() != ctx.root_rank:  # root_rank is a global rank, as in Horovod
            averaged = averaged * 0
        return averaged, None, None, None


class AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _grad_received):
        grad, _ = AlltoallFn.apply(grad_output.contiguous(), ctx.received, None,
                                   ctx.process_set)
        return grad, None, None, None


class ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        _keep_scales(ctx, op, prescale_factor, postscale_factor, process_set)
        return synchronize(reducescatter_async(tensor, name, op, process_set,
                                               prescale_factor=prescale_factor,
                                               postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        _linear(ctx.op, "reducescatter")
        grad = _scattered_gradient(ctx, grad_output.contiguous())
        return AllgatherFn.apply(grad, None, ctx.process_set), None, None, None, None, None


class GroupedReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        _keep_scales(ctx, op, prescale_factor, postscale_factor, process_set)
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor=prescale_factor,
            postscale_factor=postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        _linear(ctx.op, "grouped_reducescatter")
        grads = [_scattered_gradient(ctx, g.contiguous()) for g in grad_outputs]
        return (None, None, None, None, None,
                *GroupedAllgatherFn.apply(None, ctx.process_set, *grads))
