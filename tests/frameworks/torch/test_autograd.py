"""Gradients of the differentiable collectives against the analytic values documented in
threelc/torch/autograd.py:

- allreduce: the same allreduce (op, prescale, postscale) of the incoming gradient;
- grouped allreduce: the same, for every tensor of the group;
- allgather: the sum of the incoming gradients over the ranks, this rank's rows of it;
- broadcast: the sum of the incoming gradients on the root rank, zeros elsewhere;
- alltoall: the alltoall of the incoming gradient back along the received splits;
- reducescatter: the allgather of the incoming gradients, times prescale * postscale (and
  divided by size() for Average).

Each rank's loss is sum(output * w_rank) with rank-seeded integer weights w, so the incoming
gradient of rank r is w_r, which every rank can recompute.
"""

from __future__ import annotations

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import (assert_same, dtype_id, ints, op_data, op_id, rank,
                                   reduce_reference, rows_of, size)

GRAD_DTYPES = [torch.float32, torch.float64]


def weights(salt, shape, dtype, n=None):
    """Every rank's incoming gradient (integers in [-5, 5])."""
    n = size() if n is None else n
    return [ints(salt, r, shape, -5, 5).to(dtype) for r in range(n)]


def leaf(t):
    return t.clone().requires_grad_()


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
    y = hvd.allgather(x, name=names("y"))
    (y * ws[me]).sum().backward()
    offset = sum(r + 1 for r in range(me))
    summed = torch.stack(ws).sum(0)
    assert_same(y.detach(), torch.cat(inputs), "allgather forward")
    assert_same(x.grad, summed[offset:offset + me + 1], "allgather gradient")


@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_broadcast_grad(dtype, names, salt):
    n, me = size(), rank()
    for root in range(n):
        inputs = [ints(salt + root, r, (2, 3), -9, 9).to(dtype) for r in range(n)]
        ws = weights(salt + 100 + root, (2, 3), dtype)
        x = leaf(inputs[me])
        y = hvd.broadcast(x, root, name=names(f"root{root}"))
        (y * ws[me]).sum().backward()
        want = torch.stack(ws).sum(0) if me == root else torch.zeros((2, 3), dtype=dtype)
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
@pytest.mark.parametrize("dtype", GRAD_DTYPES, ids=dtype_id)
def test_reducescatter_grad(dtype, op, scales, names, salt):
    n, me = size(), rank()
    pre, post = scales
    rows = 2 * n + 1
    inputs = op_data(salt, (rows, 2), dtype, op)
    parts = [rows_of(r, rows, n) for r in range(n)]
    ws = [ints(salt + 1, r, (parts[r][1], 2), -5, 5).to(dtype) for r in range(n)]
    x = leaf(inputs[me])
    y = hvd.reducescatter(x, name=names("y"), op=op, prescale_factor=pre,
                          postscale_factor=post)
    (y * ws[me]).sum().backward()
    offset, count = parts[me]
    scale = pre * post / (n if int(op) == int(hvd.Average) else 1)
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
