"""Sparse tensors: sparse_allreduce_async (Horovod's test_async_sparse_allreduce: its dense
form equals the allreduce of the dense tensors) and DistributedOptimizer with sparse gradients
(Horovod's test_sparse_embeddings), through sparse_allreduce_async and with sparse_as_dense;
either way p.grad stays sparse, and the step equals a single-process step on the averaged
gradient."""

from __future__ import annotations

import copy

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import (assert_same, catch, dtype_id, gather_rows, ints, op_id, rank,
                                   reduce_reference, size)


def sparse_input(salt, r, shape, dtype, dense_dims=0):
    """Rank r's sparse tensor: small integers, about a third of the entries set (a different
    number on every rank), uncoalesced when `shape` allows (an index listed twice)."""
    values = ints(salt, r, shape, -8, 8)
    keep = ints(salt + 1, r, shape[:len(shape) - dense_dims], 0, 2) == 0
    dense = torch.where(keep.reshape(keep.shape + (1,) * dense_dims), values,
                        torch.zeros_like(values)).to(dtype)
    s = dense.to_sparse(len(shape) - dense_dims)
    if s._nnz() > 1:  # split the first entry in two halves at the same index
        i, v = s._indices(), s._values()
        half = (v[:1] / 2).to(dtype) if dtype.is_floating_point else v[:1] // 2
        s = torch.sparse_coo_tensor(torch.cat([i, i[:, :1]], 1),
                                    torch.cat([v[:1] - half, v[1:], half]), shape, **CHECKED)
    return s


CHECKED = {"check_invariants": True} \
    if hasattr(torch.sparse, "check_sparse_tensor_invariants") else {}
CASES = [((17, 10), 0), ((12, 4), 1), ((3, 4, 5), 1), ((30,), 0)]


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.float32, torch.float64],
                         ids=dtype_id)
def test_sparse_allreduce_equals_the_dense_allreduce(dtype, op, names, salt):
    inputs = [[sparse_input(salt + k, r, shape, dtype, dd) for r in range(size())]
              for k, (shape, dd) in enumerate(CASES)]
    handles = [hvd.sparse_allreduce_async(per_rank[rank()], names(str(k)), op)
               for k, per_rank in enumerate(inputs)]
    unnamed = hvd.sparse_allreduce_async(inputs[0][rank()], None, op)
    polled = [hvd.poll(h) for h in handles]
    got = [handles[0]()] + [hvd.synchronize(h) for h in handles[1:]]
    got_unnamed = unnamed(timeout=60)
    for k, per_rank in enumerate(inputs):
        expected = reduce_reference([s.to_dense() for s in per_rank], op)
        assert got[k].is_sparse and got[k].is_coalesced(), f"case {k}: not a coalesced sparse"
        assert got[k].sparse_dim() == per_rank[0].sparse_dim()
        assert_same(got[k].to_dense(), expected, f"sparse allreduce case {k}")
    assert_same(got_unnamed.to_dense(), reduce_reference([s.to_dense() for s in inputs[0]], op),
                "unnamed sparse allreduce")
    assert all(isinstance(p, bool) for p in polled)


def test_sparse_allreduce_of_empty_tensors(names):
    """Rank 0 holds no entry; then no rank does."""
    shape = (6, 3)
    mine = torch.zeros(shape).to_sparse(1) if rank() == 0 else \
        torch.full(shape, float(rank())).to_sparse(1)
    some = hvd.sparse_allreduce_async(mine, names("some"), hvd.Sum)()
    none = hvd.sparse_allreduce_async(torch.zeros(shape).to_sparse(1), names("none"), hvd.Sum)()
    expected = torch.full(shape, float(sum(range(size()))))
    assert_same(some.to_dense(), expected, "rank 0 empty")
    assert none._nnz() == 0 and none.shape == shape and none.sparse_dim() == 1


def test_sparse_allreduce_of_other_shapes_fails_naming_them(names, multi_rank):
    """The last rank's tensor has a row more, with an entry in it: the other ranks cannot
    place that entry and say so (the last rank gets its result)."""
    last = rank() == size() - 1
    mine = torch.ones(5 if last else 4, 2).to_sparse(1)
    out, error = catch(hvd.sparse_allreduce_async(mine, names("x"), hvd.Sum))
    if last:
        assert error is None and out.shape == (5, 2), repr(error)
    else:
        assert isinstance(error, ValueError) and "same shape" in str(error), repr(error)
        assert "at [4], outside this rank's shape (4, 2)" in str(error), str(error)


def test_sparse_allreduce_refuses_bad_input():
    _, dense = catch(hvd.sparse_allreduce_async, torch.ones(3), "d", hvd.Sum)
    _, op = catch(hvd.sparse_allreduce_async, torch.ones(3).to_sparse(), "m", hvd.Max)
    assert isinstance(dense, TypeError) and "sparse COO" in str(dense), repr(dense)
    assert isinstance(op, ValueError) and "Sum or Average" in str(op), repr(op)


# ---------------------------------------------------------------- DistributedOptimizer

LR = 0.1


def embedding(salt):
    torch.manual_seed(salt)
    return torch.nn.Embedding(10, 3, sparse=True).double()


def loss(model, salt, r):
    """Rank r looks up 6 + r indices (repeats likely): sparse, uncoalesced gradients."""
    idx = torch.randint(0, 10, (6 + r,), generator=torch.Generator().manual_seed(salt + r))
    return model(idx).pow(2).sum()


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["sparse", "as_dense"])
def test_sparse_gradients_are_averaged(sparse_as_dense, names, salt):
    model = embedding(salt)
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none,
                                   sparse_as_dense=sparse_as_dense)
    opt.zero_grad()
    loss(model, salt, rank()).backward()
    opt.step()
    grad = model.weight.grad
    rows = gather_rows(model.weight.detach(), names("params"))
    per_rank = []
    for r in range(size()):
        m = copy.deepcopy(reference)
        loss(m, salt, r).backward()
        per_rank.append(m.weight.grad.to_dense())
    average = torch.stack(per_rank).sum(0) / size()
    with torch.no_grad():
        reference.weight -= LR * average
    assert grad.is_sparse, "p.grad must stay sparse"
    assert torch.allclose(grad.to_dense(), average, rtol=1e-12, atol=1e-12)
    assert all(torch.equal(row, rows[0]) for row in rows), "ranks' parameters differ"
    assert torch.allclose(model.weight, reference.weight, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["sparse", "as_dense"])
def test_sparse_adam(sparse_as_dense, names, salt):
    """Horovod's test_sparse_embeddings: SparseAdam takes only sparse gradients, and the ranks
    look up different numbers of indices."""
    model = embedding(salt).float()
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(model.parameters()), lr=LR),
                                   sparse_as_dense=sparse_as_dense)
    for step in range(2):
        opt.zero_grad()
        loss(model, salt + step, rank()).backward()
        opt.step()
    rows = gather_rows(model.weight.detach(), names("params"))
    assert model.weight.grad.is_sparse
    assert all(torch.equal(row, rows[0]) for row in rows), "ranks' parameters differ"
