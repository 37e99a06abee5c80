"""Tests of threelc.codec (the numpy bindings of the 3LC codec).

Expectations come from an independent numpy model of block format version 1 as
docs/WIRE_FORMAT.md gives it ("Encoding a block of n values", "Layout": quantization,
base-3^5 packing, zero-run encoding, serialization), never from the library itself.

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/python
"""

from __future__ import annotations

import itertools
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import threelc
from threelc import codec

F32 = np.float32
G = 4096                 # groups per tile
TILE = 5 * G             # values per tile
HEADER = struct.Struct("<BBHIfI")  # format, flags, reserved, n, scale, payload_bytes
REPO = Path(__file__).resolve().parents[2]
PKG_DIR = REPO / "frameworks" / "python"


# --------------------------------------------------------------------------------------
# Independent model of the block format.


def ref_quantize(x: np.ndarray, e: np.ndarray | None, s: float):
    """Returns (raw?, a, scale, q, d, e_new) per docs/WIRE_FORMAT.md steps 1-4 and 8."""
    with np.errstate(over="ignore", invalid="ignore"):
        a = x.astype(F32) + (np.zeros(x.shape, F32) if e is None else e)
        m = np.max(np.abs(a)) if a.size else F32(0)
        scale = F32(m) * F32(s)
    if not np.all(np.isfinite(a)) or not np.isfinite(scale):
        return True, a, None, None, None, None
    h = F32(0.5) * scale
    q = np.where(a > h, 1, np.where(a < -h, -1, 0)).astype(np.int8)
    d = (q.astype(F32) * scale).astype(F32)
    e_new = (a - d).astype(F32)
    return False, a, F32(scale), q, d, e_new


def ref_pack_tile(q: np.ndarray) -> bytes:
    """Quartic packing (step 6) then zero-run encoding (step 7) of one tile's trits."""
    g = (q.size + 4) // 5
    padded = np.zeros(5 * g, np.int64)
    padded[: q.size] = q
    t = padded.reshape(5, g) + 1          # t[k, j] = trit of element j + k*g, plus 1
    groups = 81 * t[0] + 27 * t[1] + 9 * t[2] + 3 * t[3] + t[4]
    out = bytearray()
    for value, run in itertools.groupby(groups.tolist()):
        k = len(list(run))
        if value != 121:
            out += bytes([value]) * k
            continue
        out += b"\xff" * (k // 14)
        r = k % 14
        if r == 1:
            out.append(121)
        elif r >= 2:
            out.append(243 + r - 2)
    return bytes(out)


def ref_block(n: int, scale, q: np.ndarray) -> bytes:
    tiles = [ref_pack_tile(q[b: b + TILE]) for b in range(0, n, TILE)]
    payload = b"".join(tiles)
    table = b"".join(struct.pack("<H", len(t)) for t in tiles)
    return HEADER.pack(1, 0, 0, n, float(scale), len(payload)) + table + payload


def ref_encode_tiled(x, e, s, tile):
    """(block bytes, decoded values, new error or None for raw) of format v2: one scale per
    tile of `tile` values, each quantized and packed as a v1 tile with its own scale. A
    block of one tile is written as v1 (the same quantization, 4 bytes fewer)."""
    if x.size <= tile:
        return ref_encode(x, e, s)
    a = x.astype(F32) + e
    if not np.all(np.isfinite(a)):
        return ref_raw_block(x), x.astype(F32), None
    lengths, scales, tiles, d = [], [], [], np.zeros(x.size, F32)
    for b in range(0, x.size, tile):
        raw, _, scale, q, d_tile, _ = ref_quantize(a[b: b + tile], None, s)
        if raw:
            return ref_raw_block(x), x.astype(F32), None
        packed = ref_pack_tile(q)
        lengths.append(struct.pack("<H", len(packed)))
        scales.append(struct.pack("<f", scale))
        tiles.append(packed)
        d[b: b + tile] = d_tile
    payload = b"".join(tiles)
    top = max((struct.unpack("<f", v)[0] for v in scales), default=0.0)
    header = HEADER.pack(2, 0, tile // 5, x.size, top, len(payload))
    return header + b"".join(lengths) + b"".join(scales) + payload, d, (a - d).astype(F32)


def ref_raw_block(x: np.ndarray) -> bytes:
    v = x.astype(F32)
    return HEADER.pack(0, 0, 0, v.size, 0.0, 4 * v.size) + v.tobytes()


def ref_encode(x, e=None, s=1.0):
    """(block bytes, decoded values, new error or None for raw) of the model."""
    raw, a, scale, q, d, e_new = ref_quantize(x, e, s)
    if raw:
        return ref_raw_block(x), x.astype(F32), None
    return ref_block(x.size, scale, q), d, e_new


def ref_unpack(block: bytes) -> np.ndarray:
    """Independent decoder of a well-formed block (used for hand-made blocks)."""
    fmt, flags, res, n, scale, payload = HEADER.unpack_from(block)
    assert flags == 0 and res == 0
    if fmt == 0:
        return np.frombuffer(block, F32, n, HEADER.size).copy()
    ntiles = (n + TILE - 1) // TILE
    lengths = struct.unpack_from(f"<{ntiles}H", block, HEADER.size)
    pos = HEADER.size + 2 * ntiles
    out = np.zeros(n, F32)
    for t, length in enumerate(lengths):
        count = min(TILE, n - t * TILE)
        g = (count + 4) // 5
        groups = []
        for b in block[pos: pos + length]:
            groups += [121] * (b - 241) if b >= 243 else [b]
        assert len(groups) == g
        pos += length
        trits = np.zeros((5, g), np.int64)
        v = np.array(groups, np.int64)
        for k in range(4, -1, -1):
            trits[k] = v % 3 - 1
            v //= 3
        out[t * TILE: t * TILE + count] = (trits.reshape(-1)[:count].astype(F32) * F32(scale))
    return out


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def gradient_like(rng, n, kind):
    if kind == "normal":
        return rng.standard_normal(n).astype(F32)
    if kind == "heavy":  # few large values, many near zero: long zero runs
        return (rng.standard_cauchy(n) * 1e-3).astype(F32)
    if kind == "sparse":
        x = np.zeros(n, F32)
        idx = rng.choice(n, size=max(1, n // 50), replace=False) if n else []
        x[idx] = rng.standard_normal(len(idx)).astype(F32)
        return x
    if kind == "zeros":
        return np.zeros(n, F32)
    if kind == "tiny":  # subnormals
        return (rng.standard_normal(n) * 1e-40).astype(F32)
    raise ValueError(kind)


SIZES = [0, 1, 4, 5, 6, 7, 99, TILE - 1, TILE, TILE + 1, TILE + 7, 3 * TILE + 3, 100_003]
KINDS = ["normal", "heavy", "sparse", "zeros", "tiny"]


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


# --------------------------------------------------------------------------------------
# Malformed blocks: every one must raise ValueError with the library's message.


def _sample_block():
    """A 3LC block of 2 tiles + a short third tile, with literals and zero runs."""
    rng = np.random.default_rng(11)
    x = gradient_like(rng, 2 * TILE + 1234, "normal")
    return bytearray(codec.compress(x)), x.size


def _with_header(block, **fields):
    fmt, flags, res, n, scale, payload = HEADER.unpack_from(block)
    values = dict(fmt=fmt, flags=flags, res=res, n=n, scale=scale, payload=payload)
    values.update(fields)
    out = bytearray(block)
    HEADER.pack_into(out, 0, values["fmt"], values["flags"], values["res"], values["n"],
                     values["scale"], values["payload"])
    return out


def _tile_offsets(block):
    n = HEADER.unpack_from(block)[3]
    ntiles = (n + TILE - 1) // TILE
    lengths = struct.unpack_from(f"<{ntiles}H", block, HEADER.size)
    start = HEADER.size + 2 * ntiles
    offsets = [start + sum(lengths[:t]) for t in range(ntiles)]
    return ntiles, lengths, offsets


def _malformed_cases():
    block, n = _sample_block()
    ntiles, lengths, offsets = _tile_offsets(block)
    cases = {
        "empty": (b"", "header"),
        "short header": (bytes(block[:15]), "header"),
        "truncated table": (bytes(block[:HEADER.size + 3]), "tile table"),
        "truncated by one": (bytes(block[:-1]), "payload"),
        "one byte extra": (bytes(block + b"\x79"), "payload"),
        "format 3": (_with_header(block, fmt=3), "format"),
        "v2, 0 groups per tile": (_with_header(block, fmt=2, res=0), "groups per tile"),
        "v2, 4097 groups per tile": (_with_header(block, fmt=2, res=4097), "groups per tile"),
        "format 255": (_with_header(block, fmt=255), "format"),
        "flags 1": (_with_header(block, flags=1), "flags"),
        "flags 128": (_with_header(block, flags=128), "flags"),
        "reserved": (_with_header(block, res=1), "reserved"),
        "payload +1": (_with_header(block, payload=HEADER.unpack_from(block)[5] + 1), "payload"),
        "payload -1": (_with_header(block, payload=HEADER.unpack_from(block)[5] - 1), "payload"),
        "count +5": (_with_header(block, n=n + 5), "group"),
        "count huge": (_with_header(block, n=0xFFFFFFFF), "tile table"),
        "scale nan": (_with_header(block, scale=float("nan")), "scale"),
        "scale inf": (_with_header(block, scale=float("inf")), "scale"),
        "scale negative": (_with_header(block, scale=-1.0), "scale"),
    }
    # tile table: a length past the payload
    bad = bytearray(block)
    struct.pack_into("<H", bad, HEADER.size, 0xFFFF)
    cases["tile length past payload"] = (bytes(bad), "past the payload")
    # tile table: lengths that do not sum to the payload
    bad = bytearray(block)
    struct.pack_into("<H", bad, HEADER.size + 2 * (ntiles - 1), lengths[-1] - 1)
    cases["tile lengths short of payload"] = (bytes(bad), "")
    # tile table: a byte moved from tile 0 to tile 1 (same sum, wrong group counts)
    bad = bytearray(block)
    struct.pack_into("<H", bad, HEADER.size, lengths[0] + 1)
    struct.pack_into("<H", bad, HEADER.size + 2, lengths[1] - 1)
    cases["tile boundary moved"] = (bytes(bad), "groups")
    # a tile that expands to too many groups: a literal becomes a 14-run
    tile0 = bytes(block[offsets[0]: offsets[0] + lengths[0]])
    lit = next(i for i, b in enumerate(tile0) if b <= 242 and b != 121)
    bad = bytearray(block)
    bad[offsets[0] + lit] = 255
    cases["too many groups"] = (bytes(bad), "groups")
    # ... and too few: a run byte becomes one literal group
    run = next(i for i, b in enumerate(tile0) if b >= 243)
    bad = bytearray(block)
    bad[offsets[0] + run] = 0
    cases["too few groups"] = (bytes(bad), "groups")
    # raw blocks
    raw = bytearray(codec.compress_raw(np.arange(10, dtype=F32)))
    cases["raw with scale"] = (_with_header(raw, scale=1.0), "scale")
    cases["raw payload field"] = (_with_header(raw, payload=36), "payload")
    cases["raw truncated"] = (bytes(raw[:-4]), "bytes")
    cases["raw count +1"] = (_with_header(raw, n=11), "")
    return cases


MALFORMED_NAMES = [
    "empty", "short header", "truncated table", "truncated by one", "one byte extra",
    "format 3", "v2, 0 groups per tile", "v2, 4097 groups per tile", "format 255", "flags 1",
    "flags 128", "reserved", "payload +1", "payload -1",
    "count +5", "count huge", "scale nan", "scale inf", "scale negative",
    "tile length past payload", "tile lengths short of payload", "tile boundary moved",
    "too many groups", "too few groups", "raw with scale", "raw payload field",
    "raw truncated", "raw count +1",
]


@pytest.fixture(scope="module")
def malformed():
    cases = _malformed_cases()
    assert sorted(cases) == sorted(MALFORMED_NAMES)
    return cases


@pytest.mark.parametrize("name", MALFORMED_NAMES)
def test_malformed_block_rejected(name, malformed):
    block, fragment = malformed[name]
    for call in (codec.inspect, codec.decompress):
        with pytest.raises(ValueError) as info:
            call(block)
        message = str(info.value)
        assert len(message) > len("malformed block: ") + 5
        assert fragment.lower() in message.lower(), message
        assert isinstance(info.value, codec.CodecError) and info.value.code == -2
    n = HEADER.unpack_from(block)[3] if len(block) >= 16 else 10
    dst = np.full(min(n, 1 << 20), 3.0, F32)
    with pytest.raises(ValueError):
        codec.decompress_add(block, dst)
    assert np.all(dst == 3.0)


def test_fuzzed_blocks_never_crash():
    """Random byte flips: each either decodes like the model or raises ValueError."""
    block, _ = _sample_block()
    rng = np.random.default_rng(12)
    rejected = 0
    for _ in range(300):
        bad = bytearray(block)
        for _ in range(rng.integers(1, 4)):
            bad[rng.integers(0, len(bad))] = rng.integers(0, 256)
        try:
            got = codec.decompress(bytes(bad))
        except ValueError:
            rejected += 1
            continue
        np.testing.assert_array_equal(bits(got), bits(ref_unpack(bytes(bad))))
    assert rejected > 0


# --------------------------------------------------------------------------------------
# Argument checking.


@pytest.mark.parametrize("x, exc, fragment", [
    (np.zeros(8, np.float64), TypeError, "float64"),
    (np.zeros(8, np.int32), TypeError, "int32"),
    (np.zeros(8, np.dtype(">f4")), TypeError, "dtype"),
    ([1.0, 2.0], TypeError, "numpy"),
    (np.zeros((2, 4), F32), ValueError, "1-D"),
    (np.float32(1.0), TypeError, "numpy"),
    (np.zeros((), F32), ValueError, "1-D"),
    (np.zeros(16, F32)[::2], ValueError, "contiguous"),
])
def test_bad_input(x, exc, fragment):
    with pytest.raises(exc, match=fragment):
        codec.compress(x)
    with pytest.raises(exc, match=fragment):
        codec.compress_raw(x)


@pytest.mark.parametrize("error, exc, fragment", [
    (np.zeros(8, np.float64), TypeError, "float64"),
    (np.zeros(8, np.float16), TypeError, "float16"),
    (np.zeros(7, F32), ValueError, "shape"),
    (np.zeros((8, 1), F32), ValueError, "1-D"),
    (np.zeros(16, F32)[::2], ValueError, "contiguous"),
    ([0.0] * 8, TypeError, "numpy"),
])
def test_bad_error_buffer(error, exc, fragment):
    x = np.ones(8, F32)
    with pytest.raises(exc, match=fragment):
        codec.compress(x, error)


def test_read_only_or_aliased_error_buffer():
    x = np.ones(8, F32)
    e = np.zeros(8, F32)
    e.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        codec.compress(x, e)
    with pytest.raises(ValueError, match="overlap"):
        codec.compress(x, x)


def test_bad_block_type():
    with pytest.raises(TypeError):
        codec.decompress("not bytes")
    with pytest.raises(TypeError):
        codec.decompress(np.zeros(16, np.int32))


# --------------------------------------------------------------------------------------
# Library loading and kernel selection (fresh interpreters).


def _python(code: str, **env_overrides):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PKG_DIR) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_threelc_library_missing_file(tmp_path):
    missing = tmp_path / "nowhere" / "libthreelc.so"
    proc = _python("import threelc", THREELC_LIBRARY=str(missing))
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr
    assert str(missing) in proc.stderr
    assert "THREELC_LIBRARY" in proc.stderr


def test_threelc_library_not_a_library(tmp_path):
    bogus = tmp_path / "libthreelc.so"
    bogus.write_text("not an ELF file")
    proc = _python("import threelc", THREELC_LIBRARY=str(bogus))
    assert proc.returncode != 0
    assert str(bogus) in proc.stderr and "could not be loaded" in proc.stderr


def test_threelc_library_override_loads():
    lib_path = Path(threelc._library.path).resolve()
    proc = _python("import threelc, threelc._library as l; print(l.path, threelc.__version__)",
                   THREELC_LIBRARY=str(lib_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(lib_path), threelc.__version__]


_ISA_SCRIPT = """
import hashlib, numpy as np
from threelc import codec
rng = np.random.default_rng(13)
h = hashlib.sha256()
for n in (1, 5, 4097, 20480, 20481, 70001):
    for s in (1.0, 1.5):
        x = (rng.standard_cauchy(n) * 1e-3).astype(np.float32)
        e = (rng.standard_normal(n) * 1e-4).astype(np.float32)
        h.update(codec.compress(x, e, sparsity=s)); h.update(e.tobytes())
        b = codec.compress(x.astype(np.float16), e)
        d = codec.decompress(b); h.update(b); h.update(d.tobytes())
        acc = np.ones(n, np.float32); codec.decompress_add(b, acc, 0.5); h.update(acc.tobytes())
print(codec.isa(), h.hexdigest())
"""


def test_every_isa_produces_identical_bytes():
    """Blocks, errors and decodes are bit-identical across the kernel sets this CPU runs."""
    results = {}
    for isa in ("scalar", "avx2", "avx512"):
        proc = _python(_ISA_SCRIPT, THREELC_CODEC_ISA=isa)
        assert proc.returncode == 0, proc.stderr
        used, digest = proc.stdout.split()
        if used == isa:
            results[isa] = digest
    assert "scalar" in results
    assert len(set(results.values())) == 1, results
