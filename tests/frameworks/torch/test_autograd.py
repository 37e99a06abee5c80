"""Gradients of the differentiable collectives against Horovod's (horovod.torch's backward
passes, threelc/torch/autograd.py), computed here from every rank's incoming gradient:

- allreduce: the same allreduce (op, prescale, postscale) of the incoming gradients;
- grouped allreduce: the same, for every tensor of the group;
- allgather: the mean over the ranks of the incoming gradients, this rank's rows of it;
- broadcast: the mean over the ranks of the incoming gradients on the root rank, zeros
  elsewhere;
- alltoall: the incoming gradients sent back along the received splits;
- reducescatter: every rank's incoming gradient, concatenated, times prescale * postscale, and
  times size() for Sum (not divided for Average).

Each rank's loss is sum(output * w_rank) with rank-seeded integer weights w, so the incoming
gradient of rank r is w_r, which every rank can recompute. The backward passes are
differentiable too (create_graph=True), as Horovod's are.
"""

from __future__ import annotations

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import (assert_same, catch, dtype_id, ints, op_data, op_id, rank,
                                   reduce_reference, rows_of, size)

GRAD_DTYPES = [torch.float32, torch.float64]


def weights(salt, shape, dtype, n=None):
    """Every rank's incoming gradient (integers in [-5, 5])."""
    n = size() if n is None else n
    return [ints(salt, r, shape, -5, 5).to(dtype) for r in range(n)]


def leaf(t):
    return t.clone().requires_grad_()


def mean(per_rank):
    """The mean over the ranks (the sum of integers is exact; one division)."""
    return torch.stack(per_rank).sum(0) / len(per_rank)


@pytest.mark.parametrize("scales", [(1.0, 1.0), (0.5, 3.0)], ids=["unscaled", "scaled"])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_allreduce_grad(dtype, op, scales, names, salt):
    pre, post = scales
    inputs = op_data(salt, (3, 4), dtype, op)
    ws = weights(salt + 1, (3, 4), dtype)
    x = leaf(inputs[rank()])
    y = hvd.allreduce(x, name=names("y"), op=op, prescale_factor=pre, postscale_factor=post)
    (y * ws[rank()]).sum().backward()
    assert_same(y.detach(), reduce_reference(inputs, op, pre, post), "allreduce forward")
    assert_same(x.grad, reduce_reference(ws, op, pre, post), "allreduce gradient")


def test_allreduce_grad_through_a_chain(names, salt):
    """Two allreduces and local operations in a row: the chain rule through both."""
    n = size()
    inputs = op_data(salt, (5,), torch.float64, hvd.Sum)
    x = leaf(inputs[rank()])
    y = hvd.allreduce(x * 2, name=names("a"), op=hvd.Sum)
    z = hvd.allreduce(y + 1, name=names("b"), op=hvd.Average)
    z.sum().backward()
    # Backward: the Average allreduce of the ones of z.sum() gives ones, the Sum allreduce
    # of those gives n, times 2: every element of x.grad is 2 n.
    assert_same(x.grad, torch.full((5,), 2.0 * n, dtype=torch.float64), "chained gradient")


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_grouped_allreduce_grad(dtype, op, names, salt):
    shapes = [(4,), (2, 3), ()]
    inputs = [op_data(salt + i, s, dtype, op) for i, s in enumerate(shapes)]
    ws = [weights(salt + 10 + i, s, dtype) for i, s in enumerate(shapes)]
    xs = [leaf(g[rank()]) for g in inputs]
    ys = hvd.grouped_allreduce(xs, name=names("g"), op=op, prescale_factor=2.0)
    # the last output is left out of the loss: its incoming gradient is zero
    loss = sum((y * w[rank()]).sum() for y, w in zip(ys[:-1], ws[:-1]))
    loss.backward()
    for i in range(len(shapes) - 1):
        assert_same(ys[i].detach(), reduce_reference(inputs[i], op, 2.0), f"forward {i}")
        assert_same(xs[i].grad, reduce_reference(ws[i], op, 2.0), f"gradient {i}")
    assert_same(xs[-1].grad, torch.zeros((), dtype=dtype), "gradient of an unused output")


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_allgather_grad(dtype, names, salt):
    n, me = size(), rank()
    inputs = [ints(salt, r, (r + 1, 3), -9, 9).to(dtype) for r in range(n)]
    total = sum(r + 1 for r in range(n))
    ws = weights(salt + 1, (total, 3), dtype)
    x = leaf(inputs[me])
    y = hvd.allgather(x, name=names("y"), process_set=hvd.global_process_set)
    (y * ws[me]).sum().backward()
    offset = sum(r + 1 for r in range(me))
    assert_same(y.detach(), torch.cat(inputs), "allgather forward")
    assert_same(x.grad, mean(ws)[offset:offset + me + 1], "allgather gradient")


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_broadcast_grad(dtype, names, salt):
    n, me = size(), rank()
    results = []  # every root's collectives first, the checks after them
    for root in range(n):
        inputs = [ints(salt + root, r, (2, 3), -9, 9).to(dtype) for r in range(n)]
        ws = weights(salt + 100 + root, (2, 3), dtype)
        x = leaf(inputs[me])
        y = hvd.broadcast(x, root, name=names(f"root{root}"), process_set=hvd.global_process_set)
        (y * ws[me]).sum().backward()
        results.append((root, inputs, ws, x, y))
    for root, inputs, ws, x, y in results:
        want = mean(ws) if me == root else torch.zeros((2, 3), dtype=dtype)
        assert_same(y.detach(), inputs[root], f"broadcast forward, root {root}")
        assert_same(x.grad, want, f"broadcast gradient, root {root}")


def _alltoall_layout(splits, n):
    """recv_offset[j][i]: where rank i's rows start in what rank j receives."""
    return [[sum(splits[k][j] for k in range(i)) for i in range(n)] for j in range(n)]


@pytest.mark.parametrize("with_splits", [True, False], ids=["splits", "equal"])
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_alltoall_grad(dtype, with_splits, names, salt):
    n, me = size(), rank()
    if with_splits:
        splits = [[(r + 2 * j) % 3 + (1 if j == r else 0) for j in range(n)] for r in range(n)]
    else:
        splits = [[2] * n for _ in range(n)]
    inputs = [ints(salt, r, (sum(splits[r]), 2), -9, 9).to(dtype) for r in range(n)]
    received = [sum(splits[k][j] for k in range(n)) for j in range(n)]
    ws = [ints(salt + 1, j, (received[j], 2), -5, 5).to(dtype) for j in range(n)]
    x = leaf(inputs[me])
    if with_splits:
        y, recv = hvd.alltoall(x, splits=splits[me], name=names("y"))
    else:
        y = hvd.alltoall(x, name=names("y"))
        recv = torch.tensor([2] * n, dtype=torch.int32)
    (y * ws[me]).sum().backward()

    layout = _alltoall_layout(splits, n)
    want_y = torch.cat([inputs[i][sum(splits[i][:me]):sum(splits[i][:me]) + splits[i][me]]
                        for i in range(n)])
    want_grad = torch.cat([ws[j][layout[j][me]:layout[j][me] + splits[me][j]]
                           for j in range(n)])
    assert_same(recv, torch.tensor([splits[i][me] for i in range(n)], dtype=torch.int32),
                "received splits")
    assert_same(y.detach(), want_y, "alltoall forward")
    assert_same(x.grad, want_grad, "alltoall gradient")


@pytest.mark.parametrize("scales", [(1.0, 1.0), (0.5, 3.0)], ids=["unscaled", "scaled"])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
@pytest.mark.parametrize("dtype", [torch.float16] + GRAD_DTYPES, ids=dtype_id)
def test_reducescatter_grad(dtype, op, scales, names, salt):
    n, me = size(), rank()
    pre, post = scales
    rows = 2 * n + 1
    inputs = op_data(salt, (rows, 2), dtype, op)
    parts = [rows_of(r, rows, n) for r in range(n)]
    ws = [ints(salt + 1, r, (parts[r][1], 2), -5, 5).to(dtype) for r in range(n)]
    x = leaf(inputs[me])
    y = hvd.reducescatter(x, name=names("y"), op=op, prescale_factor=pre,
                          postscale_factor=post, process_set=hvd.global_process_set)
    (y * ws[me]).sum().backward()
    offset, count = parts[me]
    scale = pre * post * (n if int(op) == int(hvd.Sum) else 1)
    full = reduce_reference(inputs, op, pre, post)
    assert_same(y.detach(), full[offset:offset + count], "reducescatter forward")
    assert_same(x.grad, torch.cat(ws) * scale, "reducescatter gradient")


@pytest.mark.parametrize("compression", ["fp16", "threelc"])
def test_allreduce_grad_with_compression(compression, names, salt):
    """The forward pass is compressed; the gradient is the exact allreduce of the incoming
    gradients (fp16: the allreduce runs in float16, between the casts), in the input's
    dtype."""
    comp = {"fp16": hvd.Compression.fp16, "threelc": hvd.Compression.threelc}[compression]
    shape = (40_000,)  # large enough for 3LC
    inputs = [ints(salt, r, shape, -8, 8).float() for r in range(size())]
    ws = weights(salt + 1, shape, torch.float32)
    x = leaf(inputs[rank()])
    y = hvd.allreduce(x, name=names("y"), op=hvd.Average, compression=comp)
    (y * ws[rank()]).sum().backward()
    if compression == "fp16":
        want = reduce_reference([w.half() for w in ws], hvd.Average).float()
    else:
        want = reduce_reference(ws, hvd.Average)
    assert y.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert_same(x.grad, want, f"gradient ({compression})")


def test_allreduce_second_derivative(names, salt):
    """create_graph=True: the backward's allreduce is differentiable. With y the Sum allreduce
    of x and every rank's loss sum(y * y) / 2, the gradient is the Sum allreduce of the
    incoming y's, n y; the gradient of that gradient's sum is the Sum allreduce of n ones (as
    the ones reach y's backward, n times over), n * n."""
    n = size()
    inputs = op_data(salt, (4,), torch.float64, hvd.Sum)
    x = leaf(inputs[rank()])
    y = hvd.allreduce(x, name=names("y"), op=hvd.Sum)
    (grad,) = torch.autograd.grad((y * y).sum() / 2, x, create_graph=True)
    _, error = catch(lambda: grad.sum().backward())
    assert error is None, f"the gradient is not differentiable: {error!r}"
    assert_same(grad.detach(), n * torch.stack(inputs).sum(0), "first derivative")
    assert_same(x.grad, torch.full((4,), float(n * n), dtype=torch.float64), "second derivative")


def _collective(kind, x, name):
    """(outputs, inputs) of the differentiable collective `kind` of `x` (grouped: of `x` and
    a second leaf)."""
    if kind == "allreduce":
        return [hvd.allreduce(x, name=name)], [x]
    if kind == "allgather":
        return [hvd.allgather(x, name=name)], [x]
    if kind == "broadcast":
        return [hvd.broadcast(x, 0, name=name)], [x]
    if kind == "alltoall":
        return [hvd.alltoall(x, name=name)], [x]
    if kind == "reducescatter":
        return [hvd.reducescatter(x, name=name, op=hvd.Sum)], [x]
    xs = [x, (x * 2).detach().requires_grad_()]
    grouped = {"grouped_allreduce": hvd.grouped_allreduce, "grouped_allgather":
               hvd.grouped_allgather, "grouped_reducescatter": hvd.grouped_reducescatter}
    return grouped[kind](xs, name=name), xs


@pytest.mark.parametrize("kind", ["allreduce", "grouped_allreduce", "allgather",
                                  "grouped_allgather", "broadcast", "alltoall", "reducescatter",
                                  "grouped_reducescatter"])
def test_gradient_is_differentiable(kind, names, salt):
    """Every collective's backward runs the differentiable collectives, as Horovod's: with
    create_graph=True the gradient of a loss quadratic in the output has a graph back to the
    input, and a second backward pass through it runs on every rank."""
    x = leaf(ints(salt, rank(), (2 * size(), 3), -5, 5).double())
    outputs, inputs = _collective(kind, x, names("y"))
    loss = sum((y * y).sum() for y in outputs)
    grads = torch.autograd.grad(loss, inputs, create_graph=True)
    graphs = [g.requires_grad for g in grads]
    _, error = catch(lambda: sum(g.sum() for g in grads).backward()) if all(graphs) \
        else (None, None)
    assert all(graphs), f"{kind}: a gradient without a graph ({graphs})"
    assert error is None, f"{kind}: the second backward pass failed: {error!r}"
    assert x.grad is not None and x.grad.shape == x.shape
