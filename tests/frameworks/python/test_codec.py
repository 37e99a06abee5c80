"""Tests of threelc.codec (the numpy bindings of the 3LC codec): encoding against the
independent model of the block format (codec_model.py), error feedback, decompress_add.
Malformed blocks and argument checks: test_codec_malformed.py; loading the library and
choosing the kernels: test_codec_library.py.

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/frameworks/python
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import threelc
from threelc import codec

from codec_model import (F32, HEADER, KINDS, SIZES, TILE, bits, gradient_like, ref_encode,
                         ref_encode_tiled, ref_raw_block, ref_unpack)


# --------------------------------------------------------------------------------------
# Module basics.


def test_version_and_isa():
    assert isinstance(threelc.__version__, str)
    parts = threelc.__version__.split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts)
    assert codec.isa() in {"scalar", "avx2", "avx512"}


def test_max_block_bytes():
    assert codec.max_block_bytes(0) == 16
    assert codec.max_block_bytes(1000) == 16 + 4000


# --------------------------------------------------------------------------------------
# Encoding against the model.


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_block_matches_model(n, kind):
    rng = np.random.default_rng(n * 7 + len(kind))
    x = gradient_like(rng, n, kind)
    e0 = (rng.standard_normal(n) * 0.1).astype(F32) if kind != "zeros" else np.zeros(n, F32)
    e = e0.copy()
    block = codec.compress(x, e)
    want_block, want_d, want_e = ref_encode(x, e0)
    assert block == want_block
    np.testing.assert_array_equal(bits(e), bits(want_e))
    d = codec.decompress(block)
    assert d.dtype == F32 and d.shape == (n,)
    np.testing.assert_array_equal(bits(d), bits(want_d))


@pytest.mark.parametrize("s", [1.0, 1.25, 1.5, 1.9999])
def test_sparsity_multiplier(s):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(3 * TILE + 11).astype(F32)
    e = np.zeros_like(x)
    block = codec.compress(x, e, sparsity=s)
    want_block, want_d, want_e = ref_encode(x, np.zeros_like(x), s)
    assert block == want_block
    info = codec.inspect(block)
    assert info == (x.size, codec.FORMAT_3LC, float(F32(np.max(np.abs(x))) * F32(s)))
    np.testing.assert_array_equal(bits(codec.decompress(block)), bits(want_d))
    np.testing.assert_array_equal(bits(e), bits(want_e))


@pytest.mark.parametrize("tile", [5, 1280, TILE])
@pytest.mark.parametrize("n", [0, 1, 6, 1279, 1281, TILE + 7])
def test_scale_per_tile_block_matches_model(n, tile):
    """Format v2: every tile has its own scale, so small values far from the block's largest
    are sent; decode + residual still equals input + old residual bit for bit."""
    rng = np.random.default_rng(n + tile)
    x = gradient_like(rng, n, "heavy")
    e0 = (rng.standard_normal(n) * 1e-4).astype(F32)
    e = e0.copy()
    block = codec.compress(x, e, sparsity=1.25, scale_tile=tile)
    want_block, want_d, want_e = ref_encode_tiled(x, e0, 1.25, tile)
    assert block == want_block
    np.testing.assert_array_equal(bits(e), bits(want_e))
    np.testing.assert_array_equal(bits(codec.decompress(block)), bits(want_d))
    dst = np.ones(n, F32)
    codec.decompress_add(block, dst, alpha=0.5)
    np.testing.assert_array_equal(bits(dst), bits((F32(1) + F32(0.5) * want_d).astype(F32)))
    assert codec.inspect(block).format == (2 if n > tile else 1)


def test_scale_per_tile_sends_more_of_the_small_values():
    x = np.random.default_rng(5).standard_normal(4 * 1280).astype(F32)
    x[:1280] *= 100  # one tile of large values: v1's one scale hides the others
    dense = [np.count_nonzero(codec.decompress(codec.compress(x, scale_tile=t))) for t in (0, 1280)]
    assert dense[1] > 2 * dense[0]


@pytest.mark.parametrize("tile", [-5, 3, 7, TILE + 5, 2.5, True])
def test_scale_tile_out_of_range(tile):
    with pytest.raises((ValueError, codec.CodecError), match="scale.tile"):
        codec.compress(np.ones(10, F32), scale_tile=tile)


def test_larger_sparsity_gives_smaller_blocks():
    x = np.random.default_rng(2).standard_normal(50_000).astype(F32)
    sizes = [len(codec.compress(x, sparsity=s)) for s in (1.0, 1.5, 1.9)]
    assert sizes[0] > sizes[1] > sizes[2]


def test_without_error_buffer_equals_zero_error():
    x = np.random.default_rng(3).standard_normal(10_000).astype(F32)
    e = np.zeros_like(x)
    assert codec.compress(x) == codec.compress(x, e)


def test_error_is_a_deprecated_name_of_residual():
    x = np.random.default_rng(4).standard_normal(1000).astype(F32)
    r, e = np.full_like(x, 0.25), np.full_like(x, 0.25)
    block = codec.compress(x, residual=r)
    with pytest.warns(DeprecationWarning, match="residual="):
        assert codec.compress(x, error=e) == block
    assert np.array_equal(r, e)
    with pytest.raises(TypeError, match="both residual and error"):
        codec.compress(x, r, error=e)


@pytest.mark.parametrize("s", [1.0, 1.3])
def test_error_feedback_invariant_bit_exact(s):
    """d + e_new == x + e_old bit for bit, over many steps with the same buffer."""
    rng = np.random.default_rng(4)
    n = 2 * TILE + 123
    e = np.zeros(n, F32)
    for step in range(20):
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 3)).astype(F32)
        before = (x + e).astype(F32)
        e_id = id(e)
        block = codec.compress(x, e, sparsity=s)
        assert id(e) == e_id  # updated in place, not rebound
        d = codec.decompress(block)
        after = (d + e).astype(F32)
        nz = before != 0  # +0/-0 of a zero sum compare equal, not bitwise
        np.testing.assert_array_equal(bits(after[nz]), bits(before[nz]))
        assert np.all(after[~nz] == 0)
        # residual never exceeds half a step (a > h or |a| <= h)
        scale = codec.inspect(block).scale
        assert np.all(np.abs(e) <= F32(0.5) * F32(scale))


def test_error_updated_in_place_through_a_view():
    x = np.random.default_rng(5).standard_normal(1000).astype(F32)
    backing = np.zeros(2000, F32)
    e = backing[500:1500]
    codec.compress(x, e)
    _, _, want_e = ref_encode(x, np.zeros(1000, F32))
    np.testing.assert_array_equal(bits(backing[500:1500]), bits(want_e))
    assert np.all(backing[:500] == 0) and np.all(backing[1500:] == 0)


def test_float16_input():
    rng = np.random.default_rng(6)
    x16 = rng.standard_normal(TILE + 77).astype(np.float16)
    e0 = (rng.standard_normal(x16.size) * 0.01).astype(F32)
    e = e0.copy()
    block = codec.compress(x16, e)
    want_block, want_d, want_e = ref_encode(x16.astype(F32), e0)
    assert block == want_block
    np.testing.assert_array_equal(bits(e), bits(want_e))
    np.testing.assert_array_equal(bits(codec.decompress(block)), bits(want_d))
    raw = codec.compress_raw(x16)
    assert raw == ref_raw_block(x16)
    np.testing.assert_array_equal(codec.decompress(raw), x16.astype(F32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_non_finite_input_sends_raw_and_keeps_error(bad, dtype):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(TILE + 5).astype(dtype)
    x[TILE + 2] = bad
    e0 = (rng.standard_normal(x.size) * 0.1).astype(F32)
    e = e0.copy()
    block = codec.compress(x, e)
    assert codec.inspect(block) == (x.size, codec.FORMAT_RAW, 0.0)
    assert block == ref_raw_block(x)  # the input x, not x + e
    np.testing.assert_array_equal(bits(e), bits(e0))
    d = codec.decompress(block)
    np.testing.assert_array_equal(d, x.astype(F32))  # NaN == NaN in assert_array_equal


def test_non_finite_sum_and_overflowing_scale_send_raw():
    big = np.finfo(F32).max
    # x + e overflows to +Inf
    x = np.array([big, 1.0], F32)
    e = np.array([big, 0.0], F32)
    e0 = e.copy()
    assert codec.compress(x, e) == ref_raw_block(x)
    np.testing.assert_array_equal(bits(e), bits(e0))
    # every a is finite but M * s overflows
    x = np.array([big * F32(0.75), -1.0, 0.0], F32)
    e = np.zeros(3, F32)
    assert codec.compress(x, e, sparsity=1.5) == ref_raw_block(x)
    assert np.all(e == 0)
    # the same input at s = 1 is a 3LC block
    assert codec.inspect(codec.compress(x, e, sparsity=1.0)).format == codec.FORMAT_3LC


@pytest.mark.parametrize("s", [0.0, 0.5, 0.999, 2.0, 2.5, -1.0, float("nan"), float("inf")])
def test_sparsity_out_of_range(s):
    x = np.ones(10, F32)
    e = np.zeros(10, F32)
    with pytest.raises(ValueError, match="sparsity"):
        codec.compress(x, e, sparsity=s)
    assert np.all(e == 0)


def test_compress_raw():
    x = np.random.default_rng(8).standard_normal(1001).astype(F32)
    block = codec.compress_raw(x)
    assert block == ref_raw_block(x)
    assert codec.inspect(block) == (1001, codec.FORMAT_RAW, 0.0)
    np.testing.assert_array_equal(bits(codec.decompress(block)), bits(x))


def test_hand_made_block_with_every_run_form():
    """A block written by hand: every run byte (243..255) and literal zero groups."""
    n = 3 * TILE - 2                   # last tile: 20478 values -> 4096 groups (padded)
    rng = np.random.default_rng(9)
    tiles = []
    for t in range(3):
        count = min(TILE, n - t * TILE)
        g = (count + 4) // 5
        out = bytearray()
        groups = 0
        while groups < g:
            b = int(rng.choice([0, 121, 242, 100, 243, 250, 254, 255]))
            k = b - 241 if b >= 243 else 1
            if groups + k > g:
                b, k = 121, 1
            out.append(b)
            groups += k
        tiles.append(bytes(out))
    scale = 0.375
    payload = b"".join(tiles)
    block = (HEADER.pack(1, 0, 0, n, scale, len(payload))
             + b"".join(struct.pack("<H", len(t)) for t in tiles) + payload)
    want = ref_unpack(block)
    np.testing.assert_array_equal(bits(codec.decompress(block)), bits(want))
    assert codec.inspect(bytearray(block)) == (n, 1, scale)
    np.testing.assert_array_equal(codec.decompress(memoryview(block)), want)
    np.testing.assert_array_equal(codec.decompress(np.frombuffer(block, np.uint8)), want)


# --------------------------------------------------------------------------------------
# decompress_add.


@pytest.mark.parametrize("alpha", [1.0, -0.5, 0.25, 3.0])
def test_decompress_add(alpha):
    rng = np.random.default_rng(10)
    x = gradient_like(rng, TILE + 999, "heavy")
    block = codec.compress(x)
    _, d, _ = ref_encode(x)
    scale = F32(codec.inspect(block).scale)
    dst = rng.standard_normal(x.size).astype(F32)
    dst[:50] = -0.0
    step = F32(alpha) * scale
    q = np.sign(d).astype(F32)
    want = np.where(q != 0, (dst + q * step).astype(F32), dst)
    got = dst.copy()
    assert codec.decompress_add(block, got, alpha) is got
    np.testing.assert_array_equal(bits(got), bits(want))
    # raw blocks: dst + alpha * value
    raw = codec.compress_raw(x)
    got = dst.copy()
    codec.decompress_add(raw, got, alpha)
    np.testing.assert_array_equal(bits(got), bits((dst + F32(alpha) * x).astype(F32)))


def test_decompress_add_rejects_wrong_length_and_leaves_dst():
    block = codec.compress(np.ones(100, F32))
    dst = np.full(99, 7.0, F32)
    with pytest.raises(ValueError, match="99"):
        codec.decompress_add(block, dst)
    assert np.all(dst == 7.0)
    with pytest.raises(ValueError, match="expects 99"):
        codec.decompress(block, count=99)
    with pytest.raises(TypeError):
        codec.decompress_add(block, np.zeros(100, np.float64))
    with pytest.raises(ValueError):
        codec.decompress_add(block, np.zeros((10, 10), F32))
    ro = np.zeros(100, F32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        codec.decompress_add(block, ro)
