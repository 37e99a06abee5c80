"""grouped_allgather and grouped_reducescatter (and their async forms), as Horovod's: every
tensor of the list is gathered (reduced and scattered) as by the ungrouped operation, tensor i
under ``name.i``; every tensor is checked before any is submitted; the synchronous forms are
differentiable with the ungrouped operations' gradients, Horovod's (threelc/torch/autograd.py)."""

from __future__ import annotations

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import (assert_same, catch, dtype_id, ints, op_data, op_id, rank,
                                   reduce_reference, rows_of, size)


def move_data(salt, r, shape, dtype):
    if dtype == torch.bool:
        return ints(salt, r, shape, 0, 1).bool()
    return ints(salt, r, shape, 0, 100).to(dtype)


def gather_inputs(salt, dtype):
    """Per tensor of the group, every rank's input: rank r sends r + 1 rows, r rows (rank 0
    none) and 2r + 1 values."""
    shapes = [lambda r: (r + 1, 3), lambda r: (r, 2, 2), lambda r: (2 * r + 1,)]
    return [[move_data(salt + i, r, shape(r), dtype) for r in range(size())]
            for i, shape in enumerate(shapes)]


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int64, torch.float16,
                                   torch.bfloat16, torch.float64], ids=dtype_id)
def test_grouped_allgather(dtype, names, salt):
    inputs = gather_inputs(salt, dtype)
    mine = [per_rank[rank()] for per_rank in inputs]
    out = hvd.grouped_allgather(mine, name=names("out"))
    async_out = hvd.synchronize(hvd.grouped_allgather_async(mine, name=names("async")))
    unnamed = hvd.grouped_allgather(mine)
    for i, per_rank in enumerate(inputs):
        expected = torch.cat(per_rank)
        assert_same(out[i], expected, f"grouped_allgather[{i}]")
        assert_same(async_out[i], expected, f"grouped_allgather_async[{i}]")
        assert_same(unnamed[i], expected, f"unnamed grouped_allgather[{i}]")
    assert isinstance(out, list) and len(out) == len(async_out) == len(unnamed) == 3


def reducescatter_inputs(salt, dtype, op):
    shapes = [(2 * size() + 1, 2), (size(),), (3 * size(), 2, 2)]
    return [op_data(salt + i, shape, dtype, op) for i, shape in enumerate(shapes)]


@pytest.mark.parametrize("scales", [(1.0, 1.0), (2.0, 2.0)], ids=["unscaled", "scaled"])
@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Max], ids=op_id)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float16, torch.float32], ids=dtype_id)
def test_grouped_reducescatter(dtype, op, scales, names, salt):
    pre, post = scales
    inputs = reducescatter_inputs(salt, dtype, op)
    mine = [per_rank[rank()] for per_rank in inputs]
    out = hvd.grouped_reducescatter(mine, name=names("out"), op=op, prescale_factor=pre,
                                    postscale_factor=post)
    async_out = hvd.synchronize(hvd.grouped_reducescatter_async(
        mine, name=names("async"), op=op, prescale_factor=pre, postscale_factor=post))
    for i, per_rank in enumerate(inputs):
        offset, count = rows_of(rank(), per_rank[0].shape[0], size())
        expected = reduce_reference(per_rank, op, pre, post)[offset:offset + count]
        assert_same(out[i], expected, f"grouped_reducescatter[{i}]")
        assert_same(async_out[i], expected, f"grouped_reducescatter_async[{i}]")


def test_grouped_reducescatter_defaults_to_average_and_takes_fp16_compression(names, salt):
    inputs = reducescatter_inputs(salt, torch.float32, hvd.Average)
    mine = [per_rank[rank()] for per_rank in inputs]
    out = hvd.grouped_reducescatter(mine, name=names("out"))
    fp16 = hvd.grouped_reducescatter(mine, name=names("fp16"), compression=hvd.Compression.fp16)
    _, refused = catch(hvd.grouped_reducescatter, mine, compression=hvd.Compression.threelc)
    for i, per_rank in enumerate(inputs):
        offset, count = rows_of(rank(), per_rank[0].shape[0], size())
        expected = reduce_reference(per_rank, hvd.Average)[offset:offset + count]
        assert_same(out[i], expected, f"default op [{i}]")
        assert fp16[i].dtype == torch.float32
        assert torch.allclose(fp16[i], expected, rtol=1e-3, atol=1e-2), f"fp16 [{i}]"
    assert isinstance(refused, ValueError) and "allreduce only" in str(refused), repr(refused)


def test_a_group_is_its_tensors_operations_under_name_dot_index(names, salt):
    """Rank 0 submits a group, the others the same operations one by one under name.i:
    they meet."""
    inputs = gather_inputs(salt, torch.int32)[:2]
    mine = [per_rank[rank()] for per_rank in inputs]
    if rank() == 0:
        out = hvd.synchronize(hvd.grouped_allgather_async(mine, name=names("g")))
    else:
        handles = [hvd.allgather_async(t, name=f"{names('g')}.{i}") for i, t in enumerate(mine)]
        out = [hvd.synchronize(h) for h in handles]
    for i, per_rank in enumerate(inputs):
        assert_same(out[i], torch.cat(per_rank), f"group member {i}")


def test_bad_input_is_refused_before_anything_is_submitted(names):
    """Horovod's test_horovod_grouped_reducescatter_scalar_error: a scalar in the group raises
    ValueError; the group's first tensor was not submitted either (submitting it now under
    the same name meets no duplicate)."""
    tensor, scalar = torch.zeros(3 * size(), 1), torch.tensor(float(rank()))
    before = hvd.statistics().operations
    _, scalar_error = catch(hvd.grouped_reducescatter, [tensor, scalar], name=names("rs"))
    _, sparse_error = catch(hvd.grouped_allgather_async, [tensor, tensor.to_sparse()],
                            name=names("ag"))
    hvd.barrier()
    ran = hvd.statistics().operations - before  # the barrier only
    rs = hvd.grouped_reducescatter([tensor], name=names("rs"))
    ag = hvd.grouped_allgather([tensor], name=names("ag"))
    _, empty_error = catch(hvd.grouped_allgather, [])
    _, single_error = catch(hvd.grouped_reducescatter_async, tensor)
    assert ran == 1, f"{ran - 1} operation(s) of the refused groups ran"
    assert isinstance(scalar_error, ValueError) and "scalar" in str(scalar_error)
    assert isinstance(sparse_error, TypeError) and "sparse" in str(sparse_error)
    assert_same(rs[0], torch.zeros(rows_of(rank(), 3 * size(), size())[1], 1), "after refusal")
    assert_same(ag[0], torch.zeros(3 * size() * size(), 1), "after refusal")
    assert isinstance(empty_error, ValueError) and "at least one" in str(empty_error)
    assert isinstance(single_error, TypeError) and "list" in str(single_error)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=dtype_id)
def test_grouped_allgather_grad(dtype, names, salt):
    """Each tensor's gradient is the mean over the ranks of their incoming gradients, this
    rank's rows of it (as allgather's, Horovod's)."""
    n, me = size(), rank()
    rows = [[r + 1 for r in range(n)], [2 for _ in range(n)]]
    inputs = [[ints(salt + i, r, (rows[i][r], 3), -9, 9).to(dtype) for r in range(n)]
              for i in range(2)]
    weights = [[ints(salt + 10 + i, r, (sum(rows[i]), 3), -5, 5).to(dtype) for r in range(n)]
               for i in range(2)]
    xs = [inputs[i][me].clone().requires_grad_() for i in range(2)]
    ys = hvd.grouped_allgather(xs, name=names("y"), process_set=hvd.global_process_set)
    sum((y * weights[i][me]).sum() for i, y in enumerate(ys)).backward()
    for i in range(2):
        offset = sum(rows[i][:me])
        mean = torch.stack(weights[i]).sum(0) / n
        assert_same(ys[i].detach(), torch.cat(inputs[i]), f"forward [{i}]")
        assert_same(xs[i].grad, mean[offset:offset + rows[i][me]], f"gradient [{i}]")


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
def test_grouped_reducescatter_grad(op, names, salt):
    """Each tensor's gradient is every rank's incoming gradient, concatenated, times prescale *
    postscale, and times size() for Sum (not divided for Average), as reducescatter's
    (Horovod's)."""
    n, me = size(), rank()
    pre, post = 0.5, 3.0
    inputs = reducescatter_inputs(salt, torch.float64, op)[:2]
    xs = [per_rank[me].clone().requires_grad_() for per_rank in inputs]
    ys = hvd.grouped_reducescatter(xs, name=names("y"), op=op, prescale_factor=pre,
                                   postscale_factor=post, process_set=hvd.global_process_set)
    parts = [[rows_of(r, x.shape[0], n) for r in range(n)] for x in xs]
    weights = [[ints(salt + 10 + i, r, (parts[i][r][1],) + tuple(x.shape[1:]), -5, 5).double()
                for r in range(n)] for i, x in enumerate(xs)]
    sum((y * weights[i][me]).sum() for i, y in enumerate(ys)).backward()
    scale = pre * post * (n if int(op) == int(hvd.Sum) else 1)
    for i, x in enumerate(xs):
        assert_same(x.grad, torch.cat(weights[i]) * scale, f"gradient [{i}]")


def test_grouped_reducescatter_grad_of_max_raises(names, salt):
    x = torch.ones(2 * size(), requires_grad=True)
    (y,) = hvd.grouped_reducescatter([x], name=names("y"), op=hvd.Max)
    _, error = catch(lambda: y.sum().backward())
    assert isinstance(error, NotImplementedError) and "Max" in str(error), repr(error)
