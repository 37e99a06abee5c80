"""Compression.none / fp16 / threelc / threelc(sparsity=1.5) / default, and BytePS's push_pull.

3LC results must be bitwise identical on every rank and within the 3LC error bound of the
exact result (support.torch_helpers.first_bound_sum); under one name over many steps the error
feedback keeps the running sum of results within a step-independent bound of the running
exact sum (support.torch_helpers.drift_bound_sum). Inputs are integers in [-X, X].
"""

from __future__ import annotations

import os
import time

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import (DTYPES, FLOAT_DTYPES, MIN_COMPRESS_BYTES, X, assert_same, catch,
                                   drift_bound_sum, dtype_id, first_bound_sum, gather_rows, ints,
                                   op_data, op_id, rank, reduce_reference, size, ulp)

BIG = 40_000  # elements: >= THREELC_MIN_COMPRESS_BYTES for every float dtype
SPARSITIES = {"threelc": (hvd.Compression.threelc, 1.0),
              "threelc_s1.5": (hvd.Compression.threelc(sparsity=1.5), 1.5)}


def big_inputs(salt, dtype, shape=(BIG,)):
    return [ints(salt, r, shape, -int(X), int(X)).to(dtype) for r in range(size())]


def exact_mean_or_sum(inputs, op):
    total = torch.stack([t.to(torch.float64) for t in inputs]).sum(0)
    return total / len(inputs) if int(op) == int(hvd.Average) else total


def check_3lc(got, inputs, op, s, what, names_prefix):
    """got: identical on every rank, within the first-step bound, and not exact (it was
    compressed). Collective (an allgather): every rank calls it."""
    n = size()
    rows = gather_rows(got, names_prefix)
    exact = exact_mean_or_sum(inputs, op)
    div = n if int(op) == int(hvd.Average) else 1
    bound = first_bound_sum(n, s) / div
    slack = 1e-5 * n * X + ulp(got.dtype, n * X / div + bound)
    err = (got.to(torch.float64) - exact).abs().max().item()
    assert got.dtype == inputs[0].dtype and got.shape == inputs[0].shape, what
    for r, row in enumerate(rows):
        assert torch.equal(row, rows[0]), f"{what}: rank {r}'s result differs from rank 0's"
    assert err <= bound + slack, f"{what}: max error {err} > 3LC bound {bound} (+{slack})"
    if n > 1:
        assert err > 0, f"{what}: exact result, so it was not compressed"


# --------------------------------------------------------------------------------- fp16

@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Max], ids=op_id)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_fp16_allreduce(dtype, op, names, salt):
    """Floats travel as float16 and come back in their dtype; integers are untouched."""
    # floats: small integers (the ranges of bfloat16), exact in every float type
    source = torch.bfloat16 if dtype.is_floating_point else dtype
    inputs = [t.to(dtype) for t in op_data(salt, (4, 5), source, op)]
    if dtype.is_floating_point:
        expected = reduce_reference([t.to(torch.float16) for t in inputs], op).to(dtype)
    else:
        expected = reduce_reference(inputs, op)
    out = hvd.allreduce(inputs[rank()], name=names("out"), op=op,
                        compression=hvd.Compression.fp16)
    grouped = hvd.grouped_allreduce([inputs[rank()], inputs[rank()][0]], name=names("group"),
                                    op=op, compression=hvd.Compression.fp16)
    assert_same(out, expected, "allreduce(compression=fp16)")
    assert_same(grouped[0], expected, "grouped_allreduce(compression=fp16)[0]")
    assert_same(grouped[1], expected[0], "grouped_allreduce(compression=fp16)[1]")


def test_fp16_rounds_through_float16(names):
    """A float32 value float16 cannot hold comes back rounded to float16."""
    x = torch.full((3,), 1.0 + 2.0 ** -15)  # float16 rounds it to 1.0
    out = hvd.allreduce(x, name=names("out"), op=hvd.Max, compression=hvd.Compression.fp16)
    raw = hvd.allreduce(x, name=names("raw"), op=hvd.Max)
    assert_same(out, torch.ones(3), "fp16 allreduce of 1 + 2^-15")
    assert_same(raw, x, "uncompressed allreduce of 1 + 2^-15")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32], ids=dtype_id)
def test_fp16_reducescatter_and_push_pull(dtype, names, salt):
    n, me = size(), rank()
    inputs = [t.to(dtype) for t in op_data(salt, (2 * n, 3), torch.bfloat16, hvd.Sum)]
    as16 = [t.to(torch.float16) for t in inputs] if dtype.is_floating_point else inputs
    full = reduce_reference(as16, hvd.Sum).to(dtype)
    avg = reduce_reference(as16, hvd.Average).to(dtype)
    part = hvd.reducescatter(inputs[me], name=names("rs"), op=hvd.Sum,
                             compression=hvd.Compression.fp16)
    pulled = hvd.push_pull(inputs[me], average=True, name=names("pp"),
                           compression=hvd.Compression.fp16)
    inplace = inputs[me].clone()
    returned = hvd.push_pull_(inplace, average=False, name=names("pp_"),
                              compression=hvd.Compression.fp16)
    assert_same(part, full[2 * me:2 * me + 2], "reducescatter(compression=fp16)")
    assert_same(pulled, avg, "push_pull(compression=fp16)")
    assert returned is inplace
    assert_same(inplace, full, "push_pull_(compression=fp16)")


# ---------------------------------------------------------------------------------- 3LC

@pytest.mark.parametrize("op", [hvd.Average, hvd.Sum], ids=op_id)
@pytest.mark.parametrize("compression", sorted(SPARSITIES))
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_threelc_allreduce(dtype, compression, op, names, salt):
    comp, s = SPARSITIES[compression]
    inputs = big_inputs(salt, dtype)
    out = hvd.allreduce(inputs[rank()], name=names("out"), op=op, compression=comp)
    check_3lc(out, inputs, op, s, f"allreduce({compression}, {op_id(op)}, {dtype})",
              names("gather"))


@pytest.mark.parametrize("compression", sorted(SPARSITIES))
def test_threelc_grouped_and_non_contiguous(compression, names, salt):
    comp, s = SPARSITIES[compression]
    a = big_inputs(salt, torch.float32, (200, 100))
    b = big_inputs(salt + 1, torch.bfloat16, (BIG,))
    out = hvd.grouped_allreduce([a[rank()].t(), b[rank()]], name=names("group"),
                                compression=comp)
    check_3lc(out[0], [t.t().contiguous() for t in a], hvd.Average, s,
              "grouped_allreduce[0] of a transposed tensor", names("g0"))
    check_3lc(out[1], b, hvd.Average, s, "grouped_allreduce[1]", names("g1"))


@pytest.mark.parametrize("case", ["int32", "int16", "min_op", "small_float"])
def test_threelc_leaves_what_it_cannot_compress_exact(case, names, salt):
    """Integers, ops other than Sum/Average and tensors under THREELC_MIN_COMPRESS_BYTES
    travel raw even when 3LC is asked for."""
    dtype, op, shape = {"int32": (torch.int32, hvd.Sum, (BIG,)),
                        "int16": (torch.int16, hvd.Average, (BIG,)),
                        "min_op": (torch.float32, hvd.Min, (BIG,)),
                        "small_float": (torch.float32, hvd.Average,
                                        (MIN_COMPRESS_BYTES // 4 - 1,))}[case]
    inputs = op_data(salt, shape, dtype, op)
    out = hvd.allreduce(inputs[rank()], name=names("out"), op=op,
                        compression=hvd.Compression.threelc)
    assert_same(out, reduce_reference(inputs, op), f"allreduce(threelc) of {case}")


def test_default_compression_follows_environment(names, salt):
    """Compression.default: THREELC_COMPRESSION decides (3LC unless it says none)."""
    inputs = big_inputs(salt, torch.float32)
    out = hvd.allreduce(inputs[rank()], name=names("out"), compression=hvd.Compression.default)
    if os.environ.get("THREELC_COMPRESSION", "threelc").lower() == "none":
        assert_same(out, reduce_reference(inputs, hvd.Average), "allreduce(default, none)")
    else:
        check_3lc(out, inputs, hvd.Average, float(os.environ.get("THREELC_SPARSITY", "1")),
                  "allreduce(Compression.default)", names("gather"))


@pytest.mark.parametrize("compression", sorted(SPARSITIES))
def test_threelc_error_feedback_bounds_running_sum(compression, names):
    """30 steps of Average under one name, two input patterns alternating (so that a
    systematic error would accumulate): the running sum of the outputs stays within the
    step-independent error-feedback bound of the running exact sum, every step; the outputs
    are identical on every rank."""
    comp, s = SPARSITIES[compression]
    n, me = size(), rank()
    count, steps = 20_000, 30
    i = torch.arange(count, dtype=torch.int64)
    bound = drift_bound_sum(n, s) / n
    slack = 1e-3
    cum_out = torch.zeros(count, dtype=torch.float64)
    cum_exact = torch.zeros(count, dtype=torch.float64)
    outputs, worst, first_error = [], 0.0, 0.0
    for step in range(steps):
        k = i * 31 + (i >> 7) + (step % 2) * 5
        data = [((k + r * 7919) % 17 - 8).to(torch.float32) for r in range(n)]
        out = hvd.allreduce(data[me], name=names("w"), compression=comp)
        exact = torch.stack([d.to(torch.float64) for d in data]).sum(0) / n
        if step == 0:
            first_error = (out.to(torch.float64) - exact).abs().max().item()
        cum_out += out.to(torch.float64)
        cum_exact += exact
        worst = max(worst, (cum_out - cum_exact).abs().max().item())
        outputs.append(out)
    rows = gather_rows(torch.stack(outputs), names("gather"))
    for r, row in enumerate(rows):
        assert torch.equal(row, rows[0]), f"rank {r}'s outputs differ from rank 0's"
    assert worst <= bound + slack, f"running-sum drift {worst} > bound {bound} (s={s}, n={n})"
    if n > 1:
        assert first_error > 0, "the first step was exact: nothing was compressed"


# ------------------------------------------------------------------- compressor objects

def test_compressor_objects():
    c = hvd.Compression
    assert repr(c.none) == "Compression.none" and repr(c.fp16) == "Compression.fp16"
    assert repr(c.threelc) == "Compression.threelc" and repr(c.default) == "Compression.default"
    s15 = c.threelc(sparsity=1.5)
    assert s15.sparsity == 1.5 and s15.engine.sparsity == 1.5
    assert repr(s15) == "Compression.threelc(sparsity=1.5)"
    assert c.threelc.sparsity is None
    for bad in (0.5, 2.0, 3):
        with pytest.raises(ValueError):
            c.threelc(sparsity=bad)


@pytest.mark.late(2)
def test_threelc_called_without_sparsity_follows_threelc_sparsity():
    """Compression.threelc() (no argument) should mean what Compression.threelc means: the
    sparsity of THREELC_SPARSITY (compression.py's docstring: "default THREELC_SPARSITY");
    ThreelcCompressor.__call__ defaults sparsity to 1.0, which overrides the environment.
    """
    assert hvd.Compression.threelc().sparsity is None
    assert hvd.Compression.threelc().engine == hvd.Compression.threelc.engine


def test_custom_compressor(names, salt):
    """Any object with Horovod's compress/decompress is accepted; its output travels raw."""
    class Halve:
        @staticmethod
        def compress(tensor):
            return tensor / 2, "halved"

        @staticmethod
        def decompress(tensor, ctx):
            assert ctx == "halved"
            return tensor * 2

    inputs = op_data(salt, (8,), torch.float32, hvd.Sum)
    out = hvd.allreduce(inputs[rank()], name=names("out"), op=hvd.Sum, compression=Halve)
    assert_same(out, reduce_reference(inputs, hvd.Sum), "allreduce with a custom compressor")


# ------------------------------------------------------------------------------ push_pull

@pytest.mark.parametrize("average", [True, False], ids=["average", "sum"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_push_pull(dtype, average, names, salt):
    """push_pull, push_pull_, push_pull_async, push_pull_async_ and the *_inplace aliases."""
    op = hvd.Average if average else hvd.Sum
    inputs = op_data(salt, (3, 4), dtype, op)
    expected = reduce_reference(inputs, op)
    mine = inputs[rank()]
    out = hvd.push_pull(mine, average=average, name=names("out"))
    inplace = mine.clone()
    returned = hvd.push_pull_(inplace, average=average, name=names("inplace"))
    async_out = hvd.synchronize(hvd.push_pull_async(mine, average, names("async")))
    buf = mine.clone()
    async_returned = hvd.synchronize(hvd.push_pull_async_(buf, average=average,
                                                          name=names("async_")))
    alias = mine.clone()
    hvd.synchronize(hvd.push_pull_async_inplace(alias, average=average, version=3, priority=1))
    alias2 = mine.clone()
    hvd.push_pull_inplace(alias2, average=average)
    assert_same(out, expected, "push_pull")
    assert_same(mine, inputs[rank()], "push_pull's input after the call")
    assert returned is inplace
    assert_same(inplace, expected, "push_pull_")
    assert_same(async_out, expected, "push_pull_async")
    assert async_returned is buf
    assert_same(buf, expected, "push_pull_async_")
    assert_same(alias, expected, "push_pull_async_inplace")
    assert_same(alias2, expected, "push_pull_inplace")


def test_push_pull_defaults_to_average(names, salt):
    inputs = op_data(salt, (5,), torch.float64, hvd.Average)
    out = hvd.push_pull(inputs[rank()], name=names("out"))
    assert_same(out, reduce_reference(inputs, hvd.Average), "push_pull() default")


@pytest.mark.parametrize("average", [True, False], ids=["average", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_push_pull_threelc(dtype, average, names, salt):
    """3LC push_pull in all four forms (in place into a transposed view too)."""
    op = hvd.Average if average else hvd.Sum
    comp = hvd.Compression.threelc
    inputs = big_inputs(salt, dtype, (100, 400))
    mine = inputs[rank()]
    out = hvd.push_pull(mine, average=average, name=names("out"), compression=comp)
    base = mine.t().contiguous().clone()
    view = base.t()  # non-contiguous, holding `mine`
    returned = hvd.push_pull_(view, average=average, name=names("inplace"), compression=comp)
    async_out = hvd.synchronize(hvd.push_pull_async(mine, average, names("async"),
                                                    compression=comp))
    buf = mine.clone()
    hvd.synchronize(hvd.push_pull_async_(buf, average, names("async_"), compression=comp))
    check_3lc(out, inputs, op, 1.0, "push_pull(threelc)", names("g_out"))
    assert returned is view
    check_3lc(view.contiguous(), inputs, op, 1.0, "push_pull_(threelc) into a view",
              names("g_inplace"))
    check_3lc(async_out, inputs, op, 1.0, "push_pull_async(threelc)", names("g_async"))
    check_3lc(buf, inputs, op, 1.0, "push_pull_async_(threelc)", names("g_async_"))


@pytest.mark.late(2)
def test_threelc_name_reused_with_another_size(names):
    """A name used for a 3LC allreduce of 20000 elements, then of 30000: the engine must
    survive (ideally start a fresh error-feedback buffer, as a new shape under an old name
    is fine for every uncompressed operation; at least fail this one operation). Today the
    error-feedback lookup throws and stops the engine on every rank ("threelc stopped"), so
    every later operation fails. DistributedOptimizer meets this whenever two models whose
    parameters have the same names but other shapes are trained in one process (gradients
    travel as "allreduce.<parameter name>"). The engine starts that name's error feedback
    again from zeros. (late: the test restarts the engine if it finds it stopped, so that
    the session goes on.)"""
    nm = names("w")
    first = hvd.allreduce(torch.ones(20_000), name=nm, compression=hvd.Compression.threelc)
    reused, reuse_error = catch(hvd.allreduce, torch.ones(30_000), name=nm,
                                compression=hvd.Compression.threelc)

    def sum_of_ones(name):
        return hvd.synchronize(hvd.allreduce_async(torch.ones(3), name=name, op=hvd.Sum),
                               timeout=60)

    after, after_error = catch(sum_of_ones, names("next"))
    time.sleep(0.5)  # the engine stops asynchronously: give it time to, then look again
    _, later_error = catch(sum_of_ones, names("later"))
    after_error = after_error or later_error
    if reuse_error is not None or after_error is not None:
        hvd.shutdown()  # the engine may have stopped: start a new one for the tests after
        hvd.init()
    assert first.shape == (20_000,)
    assert after_error is None, f"the operation after the reuse failed: {after_error}"
    assert_same(after, torch.full((3,), float(size())), "allreduce after the reuse")
    if reuse_error is not None:
        assert isinstance(reuse_error, hvd.ThreelcError) and nm in str(reuse_error), \
            reuse_error
    else:
        assert reused.shape == (30_000,)
