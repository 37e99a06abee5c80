"""The collectives of threelc.torch on CPU tensors of every dtype, exact (Compression.none):
allreduce (and its in-place and async forms), grouped_allreduce, allgather, broadcast,
alltoall, reducescatter; 0-d, empty and non-contiguous inputs."""

from __future__ import annotations

import warnings

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import (DTYPES, MOVE_DTYPES, OPS, assert_same, dtype_id, ints, op_data,
                                   op_id, rank, reduce_reference, rows_of, size)


def move_data(salt, r, shape, dtype):
    """Rank r's values for the collectives that only move data (any dtype, bool too)."""
    if dtype == torch.bool:
        return ints(salt, r, shape, 0, 1).bool()
    lo, hi = {torch.uint8: (0, 200), torch.int16: (-30000, 30000)}.get(dtype, (-100, 100))
    return ints(salt, r, shape, lo, hi).to(dtype)


def scale_factors(dtype):
    """(prescale, postscale): exact for integers; 0.5 and 3 for floats (the engine's rounding
    of the scaled average is reproduced by reduce_reference)."""
    return (0.5, 3.0) if dtype.is_floating_point else (2.0, 2.0)


# ------------------------------------------------------------------------------ allreduce

@pytest.mark.parametrize("op", OPS, ids=op_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_allreduce(dtype, op, names, salt):
    """allreduce, allreduce_, allreduce_async, allreduce_async_ and an unnamed allreduce give
    the exact reduction; the out-of-place forms leave the input alone."""
    inputs = op_data(salt, (3, 5), dtype, op)
    expected = reduce_reference(inputs, op)
    mine = inputs[rank()].clone()

    out = hvd.allreduce(mine, name=names("out"), op=op)
    inplace = mine.clone()
    returned = hvd.allreduce_(inplace, name=names("inplace"), op=op)
    async_out = hvd.synchronize(hvd.allreduce_async(mine, name=names("async"), op=op))
    buf = mine.clone()
    handle = hvd.allreduce_async_(buf, name=names("async_"), op=op)
    async_returned = hvd.synchronize(handle)
    unnamed = hvd.allreduce(mine, op=op)

    assert_same(out, expected, "allreduce")
    assert_same(mine, inputs[rank()], "allreduce's input after the call")
    assert returned is inplace
    assert_same(inplace, expected, "allreduce_")
    assert_same(async_out, expected, "allreduce_async")
    assert async_returned is buf
    assert_same(buf, expected, "allreduce_async_")
    assert_same(unnamed, expected, "unnamed allreduce")
    assert hvd.poll(handle)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_allreduce_prescale_postscale(dtype, op, names, salt):
    pre, post = scale_factors(dtype)
    inputs = op_data(salt, (17,), dtype, op)
    expected = reduce_reference(inputs, op, pre, post)
    mine = inputs[rank()]
    out = hvd.allreduce(mine, name=names("out"), op=op, prescale_factor=pre,
                        postscale_factor=post)
    buf = mine.clone()
    hvd.allreduce_(buf, name=names("inplace"), op=op, prescale_factor=pre, postscale_factor=post)
    assert_same(out, expected, f"allreduce(prescale={pre}, postscale={post})")
    assert_same(buf, expected, f"allreduce_(prescale={pre}, postscale={post})")


def test_allreduce_defaults_to_average(names, salt):
    inputs = op_data(salt, (6,), torch.float32, hvd.Average)
    out = hvd.allreduce(inputs[rank()], name=names("avg"))
    assert_same(out, reduce_reference(inputs, hvd.Average), "allreduce() default op")


def test_allreduce_deprecated_average_argument(names, salt):
    inputs = op_data(salt, (6,), torch.int32, hvd.Sum)
    mine = inputs[rank()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        averaged = hvd.allreduce(mine, average=True, name=names("true"))
        summed = hvd.allreduce(mine, average=False, name=names("false"))
    with pytest.raises(ValueError):
        hvd.allreduce(mine, average=True, op=hvd.Sum, name=names("both"))
    assert_same(averaged, reduce_reference(inputs, hvd.Average), "average=True")
    assert_same(summed, reduce_reference(inputs, hvd.Sum), "average=False")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


@pytest.mark.parametrize("shape", [(), (0,), (0, 4), (1,), (2, 3, 2, 2), (4099,)],
                         ids=lambda s: "x".join(map(str, s)) or "scalar")
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bfloat16], ids=dtype_id)
def test_allreduce_shapes(shape, dtype, names, salt):
    """0-d, empty, one-element, 4-d and odd-length tensors keep their shape."""
    inputs = op_data(salt, shape, dtype, hvd.Sum)
    expected = reduce_reference(inputs, hvd.Sum)
    out = hvd.allreduce(inputs[rank()], name=names("out"), op=hvd.Sum)
    buf = inputs[rank()].clone()
    hvd.allreduce_(buf, name=names("inplace"), op=hvd.Sum)
    assert_same(out, expected, f"allreduce of shape {shape}")
    assert_same(buf, expected, f"allreduce_ of shape {shape}")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_allreduce_non_contiguous(dtype, names, salt):
    """A transposed input (out of place); in place, a transposed view and a strided slice
    receive the result through the view, the rest of the base tensor is untouched."""
    bases = op_data(salt, (4, 6), dtype, hvd.Sum)
    views = [b.t() for b in bases]
    expected_t = reduce_reference([v.contiguous() for v in views], hvd.Sum)
    cols = [b[:, ::2] for b in bases]
    expected_cols = reduce_reference([c.contiguous() for c in cols], hvd.Sum)

    mine = bases[rank()]
    out = hvd.allreduce(mine.t(), name=names("out"), op=hvd.Sum)
    base = mine.clone()
    view = base.t()
    assert not view.is_contiguous()
    returned = hvd.allreduce_(view, name=names("inplace_t"), op=hvd.Sum)
    strided = mine.clone()
    hvd.synchronize(hvd.allreduce_async_(strided[:, ::2], name=names("inplace_cols"),
                                         op=hvd.Sum))

    assert_same(out, expected_t, "allreduce of a transposed tensor")
    assert returned is view
    assert_same(base.t(), expected_t, "allreduce_ into a transposed view")
    assert_same(strided[:, ::2], expected_cols, "allreduce_async_ into a strided slice")
    assert_same(strided[:, 1::2], mine[:, 1::2], "the columns outside the slice")


def test_allreduce_requires_grad_input(names, salt):
    """A leaf that requires grad: the out-of-place result is a new tensor with a grad_fn."""
    inputs = op_data(salt, (5,), torch.float32, hvd.Sum)
    x = inputs[rank()].clone().requires_grad_()
    out = hvd.allreduce(x, name=names("out"), op=hvd.Sum)
    assert out.requires_grad and out.grad_fn is not None
    assert_same(out.detach(), reduce_reference(inputs, hvd.Sum), "allreduce of a leaf")
    assert_same(x.detach(), inputs[rank()], "the leaf after allreduce")


# ---------------------------------------------------------------------- grouped allreduce

GROUP_SHAPES = [(3,), (2, 4), (), (0,)]


@pytest.mark.parametrize("op", OPS, ids=op_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_grouped_allreduce(dtype, op, names, salt):
    groups = [op_data(salt + i, shape, dtype, op) for i, shape in enumerate(GROUP_SHAPES)]
    expected = [reduce_reference(g, op) for g in groups]
    mine = [g[rank()] for g in groups]

    out = hvd.grouped_allreduce(mine, name=names("out"), op=op)
    inplace = [t.clone() for t in mine]
    returned = hvd.grouped_allreduce_(inplace, name=names("inplace"), op=op)
    async_out = hvd.synchronize(hvd.grouped_allreduce_async(mine, name=names("async"), op=op))
    buf = [t.clone() for t in mine]
    handle = hvd.grouped_allreduce_async_(buf, name=names("async_"), op=op)
    async_returned = hvd.synchronize(handle)
    unnamed = hvd.grouped_allreduce(mine, op=op)

    for i, e in enumerate(expected):
        assert_same(out[i], e, f"grouped_allreduce[{i}]")
        assert_same(mine[i], groups[i][rank()], f"grouped_allreduce input {i} after the call")
        assert returned[i] is inplace[i]
        assert_same(inplace[i], e, f"grouped_allreduce_[{i}]")
        assert_same(async_out[i], e, f"grouped_allreduce_async[{i}]")
        assert async_returned[i] is buf[i]
        assert_same(buf[i], e, f"grouped_allreduce_async_[{i}]")
        assert_same(unnamed[i], e, f"unnamed grouped_allreduce[{i}]")
    assert len(out) == len(async_out) == len(unnamed) == len(GROUP_SHAPES)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16, torch.float64], ids=dtype_id)
def test_grouped_allreduce_scale_and_non_contiguous(dtype, names, salt):
    pre, post = scale_factors(dtype)
    bases = [op_data(salt + i, (4, 3), dtype, hvd.Average) for i in range(2)]
    expected = [reduce_reference([b.t().contiguous() for b in g], hvd.Average, pre, post)
                for g in bases]
    mine = [g[rank()].clone() for g in bases]
    out = hvd.grouped_allreduce([t.t() for t in mine], name=names("out"), op=hvd.Average,
                                prescale_factor=pre, postscale_factor=post)
    views = [t.t() for t in mine]
    hvd.grouped_allreduce_(views, name=names("inplace"), op=hvd.Average, prescale_factor=pre,
                           postscale_factor=post)
    for i in range(2):
        assert_same(out[i], expected[i], f"grouped_allreduce[{i}] (transposed, scaled)")
        assert_same(mine[i].t(), expected[i], f"grouped_allreduce_[{i}] into a transposed view")


# ------------------------------------------------------------------------------ allgather

@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=dtype_id)
def test_allgather(dtype, names, salt):
    """Rank r sends r+1 rows; rank 0 sends none in the second call; 1-d too."""
    n = size()
    inputs = [move_data(salt, r, (r + 1, 3), dtype) for r in range(n)]
    empty_first = [move_data(salt + 1, r, (r, 2, 2), dtype) for r in range(n)]
    flat = [move_data(salt + 2, r, (2 * r + 1,), dtype) for r in range(n)]

    out = hvd.allgather(inputs[rank()], name=names("out"))
    async_out = hvd.synchronize(hvd.allgather_async(inputs[rank()], name=names("async")))
    out_empty = hvd.allgather(empty_first[rank()], name=names("empty_first"))
    out_flat = hvd.allgather(flat[rank()])

    assert_same(out, torch.cat(inputs), "allgather")
    assert_same(async_out, torch.cat(inputs), "allgather_async")
    assert_same(out_empty, torch.cat(empty_first), "allgather with rank 0 sending no rows")
    assert_same(out_flat, torch.cat(flat), "unnamed allgather of 1-d tensors")


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.bfloat16, torch.float64],
                         ids=dtype_id)
def test_allgather_non_contiguous_and_all_empty(dtype, names, salt):
    n = size()
    bases = [move_data(salt, r, (3, r + 2), dtype) for r in range(n)]
    out = hvd.allgather(bases[rank()].t(), name=names("t"))
    none = hvd.allgather(torch.zeros((0, 5), dtype=dtype), name=names("none"))
    assert_same(out, torch.cat([b.t() for b in bases]), "allgather of transposed tensors")
    assert_same(none, torch.zeros((0, 5), dtype=dtype), "allgather of no rows anywhere")


# ------------------------------------------------------------------------------ broadcast

@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=dtype_id)
def test_broadcast(dtype, names, salt):
    """Every root: broadcast, broadcast_, broadcast_async, broadcast_async_; 0-d and empty."""
    n = size()
    for root in range(n):
        inputs = [move_data(salt + root, r, (2, 5), dtype) for r in range(n)]
        scalars = [move_data(salt + root + 100, r, (), dtype) for r in range(n)]
        mine = inputs[rank()]

        out = hvd.broadcast(mine, root, name=names(f"out{root}"))
        inplace = mine.clone()
        returned = hvd.broadcast_(inplace, root_rank=root, name=names(f"inplace{root}"))
        async_out = hvd.synchronize(hvd.broadcast_async(mine, root, name=names(f"async{root}")))
        buf = mine.clone()
        async_returned = hvd.synchronize(hvd.broadcast_async_(buf, root))
        scalar = hvd.broadcast(scalars[rank()], root, name=names(f"scalar{root}"))
        empty = hvd.broadcast(torch.zeros((0, 3), dtype=dtype), root, name=names(f"empty{root}"))

        what = f"root {root}"
        assert_same(out, inputs[root], f"broadcast, {what}")
        assert_same(mine, inputs[rank()], f"broadcast's input after the call, {what}")
        assert returned is inplace
        assert_same(inplace, inputs[root], f"broadcast_, {what}")
        assert_same(async_out, inputs[root], f"broadcast_async, {what}")
        assert async_returned is buf
        assert_same(buf, inputs[root], f"broadcast_async_ (unnamed), {what}")
        assert_same(scalar, scalars[root], f"broadcast of a 0-d tensor, {what}")
        assert empty.shape == (0, 3) and empty.dtype == dtype


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float16, torch.int64],
                         ids=dtype_id)
def test_broadcast_non_contiguous(dtype, names, salt):
    n = size()
    root = n - 1
    bases = [move_data(salt, r, (3, 4), dtype) for r in range(n)]
    out = hvd.broadcast(bases[rank()].t(), root, name=names("out"))
    base = bases[rank()].clone()
    hvd.broadcast_(base.t(), root, name=names("inplace_t"))
    cols = bases[rank()].clone()
    hvd.broadcast_(cols[:, 1::2], root, name=names("inplace_cols"))
    assert_same(out, bases[root].t().contiguous(), "broadcast of a transposed tensor")
    assert_same(base, bases[root], "broadcast_ into a transposed view")
    assert_same(cols[:, 1::2], bases[root][:, 1::2], "broadcast_ into a strided slice")
    assert_same(cols[:, ::2], bases[rank()][:, ::2], "the columns outside the slice")


# ------------------------------------------------------------------------------- alltoall

def alltoall_reference(inputs, splits, r):
    """(rows rank r receives, its received splits) given every rank's input and splits."""
    parts, received = [], []
    for j, (x, s) in enumerate(zip(inputs, splits)):
        offset = sum(s[:r])
        parts.append(x[offset:offset + s[r]])
        received.append(s[r])
    return torch.cat(parts), torch.tensor(received, dtype=torch.int32)


@pytest.mark.parametrize("dtype", MOVE_DTYPES, ids=dtype_id)
def test_alltoall(dtype, names, salt):
    n, me = size(), rank()
    # without splits: 2 rows to every rank; the result alone is returned
    equal = [move_data(salt, r, (2 * n, 3), dtype) for r in range(n)]
    equal_splits = [[2] * n for _ in range(n)]
    # with splits: rank r sends (r + j) % 3 rows to rank j (some ranks get none)
    splits = [[(r + j) % 3 for j in range(n)] for r in range(n)]
    uneven = [move_data(salt + 1, r, (sum(splits[r]), 2), dtype) for r in range(n)]

    out = hvd.alltoall(equal[me], name=names("equal"))
    out_split, recv = hvd.alltoall(uneven[me], splits=splits[me], name=names("splits"))
    out_tsplit, recv_t = hvd.alltoall(uneven[me], splits=torch.tensor(splits[me]),
                                      name=names("tensor_splits"))
    async_equal = hvd.synchronize(hvd.alltoall_async(equal[me], name=names("async")))
    async_split = hvd.synchronize(hvd.alltoall_async(uneven[me], splits[me]))

    want_equal, want_equal_recv = alltoall_reference(equal, equal_splits, me)
    want, want_recv = alltoall_reference(uneven, splits, me)
    assert isinstance(out, torch.Tensor), "alltoall without splits returns the tensor alone"
    assert_same(out, want_equal, "alltoall without splits")
    assert_same(out_split, want, "alltoall with splits")
    assert_same(recv, want_recv, "alltoall's received splits")
    assert_same(out_tsplit, want, "alltoall with splits given as a tensor")
    assert_same(recv_t, want_recv, "alltoall's received splits (tensor splits)")
    assert isinstance(async_equal, tuple) and len(async_equal) == 2
    assert_same(async_equal[0], want_equal, "alltoall_async without splits")
    assert_same(async_equal[1], want_equal_recv, "alltoall_async's received splits")
    assert_same(async_split[0], want, "unnamed alltoall_async with splits")
    assert_same(async_split[1], want_recv, "alltoall_async's received splits")


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.bfloat16], ids=dtype_id)
def test_alltoall_non_contiguous_and_empty(dtype, names, salt):
    n, me = size(), rank()
    bases = [move_data(salt, r, (3, 2 * n), dtype) for r in range(n)]
    out = hvd.alltoall(bases[me].t(), name=names("t"))
    empty, recv = hvd.alltoall(torch.zeros((0, 4), dtype=dtype), splits=[0] * n,
                               name=names("empty"))
    want, _ = alltoall_reference([b.t() for b in bases], [[2] * n] * n, me)
    assert_same(out, want, "alltoall of a transposed tensor")
    assert empty.shape == (0, 4) and empty.dtype == dtype
    assert_same(recv, torch.zeros(n, dtype=torch.int32), "received splits of an empty alltoall")


# -------------------------------------------------------------------------- reducescatter

@pytest.mark.parametrize("op", OPS, ids=op_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_reducescatter(dtype, op, names, salt):
    """2n+1 rows: the first rank gets one row more; the async form and unnamed calls too."""
    n, me = size(), rank()
    rows = 2 * n + 1
    inputs = op_data(salt, (rows, 3), dtype, op)
    full = reduce_reference(inputs, op)
    offset, count = rows_of(me, rows, n)
    want = full[offset:offset + count]

    out = hvd.reducescatter(inputs[me], name=names("out"), op=op)
    async_out = hvd.synchronize(hvd.reducescatter_async(inputs[me], name=names("async"), op=op))
    unnamed = hvd.reducescatter(inputs[me], op=op)

    assert_same(out, want, "reducescatter")
    assert_same(async_out, want, "reducescatter_async")
    assert_same(unnamed, want, "unnamed reducescatter")


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=op_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_reducescatter_prescale_postscale(dtype, op, names, salt):
    n, me = size(), rank()
    pre, post = scale_factors(dtype)
    inputs = op_data(salt, (2 * n, 2), dtype, op)
    full = reduce_reference(inputs, op, pre, post)
    offset, count = rows_of(me, 2 * n, n)
    out = hvd.reducescatter(inputs[me], name=names("out"), op=op, prescale_factor=pre,
                            postscale_factor=post)
    assert_same(out, full[offset:offset + count], f"reducescatter(prescale={pre}, "
                                                  f"postscale={post})")


def test_reducescatter_default_op_non_contiguous_and_few_rows(names, salt):
    """Default op Average; a transposed input; a single row (ranks past the first get
    none); an empty tensor."""
    n, me = size(), rank()
    bases = op_data(salt, (3, 2 * n + 1), torch.float32, hvd.Average)
    out = hvd.reducescatter(bases[me].t(), name=names("t"))
    single = op_data(salt + 1, (1, 4), torch.int64, hvd.Sum)
    one_row = hvd.reducescatter(single[me], name=names("one"), op=hvd.Sum)
    empty = hvd.reducescatter(torch.zeros((0, 2)), name=names("empty"))

    full = reduce_reference([b.t().contiguous() for b in bases], hvd.Average)
    offset, count = rows_of(me, 2 * n + 1, n)
    assert_same(out, full[offset:offset + count], "reducescatter (default Average) of a "
                                                  "transposed tensor")
    want_one = reduce_reference(single, hvd.Sum)[:1] if me == 0 else torch.zeros((0, 4),
                                                                                 dtype=torch.int64)
    assert_same(one_row, want_one, "reducescatter of one row")
    assert empty.shape == (0, 2)


def test_name_reused_with_other_shapes_and_dtypes(names, salt):
    """One name, used again with another shape, dtype or op in later calls (all ranks
    alike): each call stands on its own, as in Horovod."""
    nm = names("reused")
    cases = [((3,), torch.float32, hvd.Sum), ((5,), torch.float32, hvd.Sum),
             ((5,), torch.int32, hvd.Max), ((2, 2), torch.float64, hvd.Average),
             ((), torch.bfloat16, hvd.Sum)]
    results = []
    for i, (shape, dtype, op) in enumerate(cases):
        inputs = op_data(salt + i, shape, dtype, op)
        results.append((hvd.allreduce(inputs[rank()], name=nm, op=op),
                        reduce_reference(inputs, op)))
    gathered = [hvd.allgather(torch.ones((rank() + 1, k)), name=nm) for k in (2, 3)]
    for i, (got, want) in enumerate(results):
        assert_same(got, want, f"allreduce {nm!r}, call {i}")
    for k, g in zip((2, 3), gathered):
        assert g.shape == (sum(range(1, size() + 1)), k)
