"""The differentiable forms of the collectives (torch.autograd.Function), as in Horovod.

Backward passes (every rank runs them, in the same order, as its backward pass reaches them):

- allreduce: the same allreduce (Sum or Average, prescale, postscale) of the incoming gradient,
  exact; Min, Max and Product have no gradient here (backward raises, where Horovod would
  return a wrong one);
- grouped allreduce: the same, for every tensor of the group;
- allgather: the sum of the incoming gradients over the ranks, this rank's rows of it;
- broadcast: the sum of the incoming gradients on the root rank, zeros elsewhere;
- alltoall: the alltoall of the incoming gradient back along the received splits;
- reducescatter: the allgather of the incoming gradients, times prescale * postscale (and
  divided by size() for Average); Min, Max and Product raise as for allreduce.
"""

from __future__ import annotations

import torch

from .. import engine as _engine
from ..engine import Average, Sum
from .async_ops import (allgather_async, alltoall_async, broadcast_async, grouped_submit,
                        reducescatter_async, submit_with_wire, synchronize)


def _linear(op, what: str) -> None:
    if int(op) not in (int(Sum), int(Average)):
        raise NotImplementedError(f"the gradient of {what} with {op!r} is not implemented: only "
                                  f"Sum and Average are differentiable")


class AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, wire):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
        return synchronize(submit_with_wire(tensor, False, name, op, prescale_factor,
                                            postscale_factor, wire))

    @staticmethod
    def backward(ctx, grad_output):
        _linear(ctx.op, "allreduce")
        grad = synchronize(submit_with_wire(
            grad_output.contiguous(), False, None, ctx.op, ctx.prescale, ctx.postscale,
            _engine.Compression.none))
        return grad, None, None, None, None, None


class GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, wire, *tensors):
        ctx.op, ctx.prescale, ctx.postscale = op, prescale_factor, postscale_factor
        handle = grouped_submit(tensors, False, None, name, op, prescale_factor,
                                postscale_factor, wire)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grad_outputs):
        _linear(ctx.op, "grouped_allreduce")
        handle = grouped_submit([g.contiguous() for g in grad_outputs], False, None, None,
                                ctx.op, ctx.prescale, ctx.postscale, _engine.Compression.none)
        return (None, None, None, None, None, *synchronize(handle))


class AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 0
        return synchronize(allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad_output):
        summed = synchronize(submit_with_wire(
            grad_output.contiguous(), False, None, Sum, 1.0, 1.0, _engine.Compression.none))
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64)))
        offset = int(rows[: _engine.rank()].sum())
        return summed.narrow(0, offset, ctx.rows), None


class BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad_output):
        summed = synchronize(submit_with_wire(
            grad_output.contiguous(), False, None, Sum, 1.0, 1.0, _engine.Compression.none))
        if _engine.rank() != ctx.root_rank:
            summed = torch.zeros_like(summed)
        return summed, None, None


class AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        output, received = synchronize(alltoall_async(tensor, splits, name))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, _grad_received):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received))
        return grad, None, None


class ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor):
        ctx.scale = prescale_factor * postscale_factor
        ctx.op = op
        return synchronize(reducescatter_async(tensor, name, op,
                                               prescale_factor=prescale_factor,
                                               postscale_factor=postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        _linear(ctx.op, "reducescatter")
        gathered = synchronize(allgather_async(grad_output.contiguous()))
        scale = ctx.scale / (_engine.size() if int(ctx.op) == int(Average) else 1)
        return (gathered * scale if scale != 1 else gathered), None, None, None, None
