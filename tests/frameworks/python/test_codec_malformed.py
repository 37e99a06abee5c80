"""threelc.codec against malformed blocks (every one must raise ValueError with the
library's message) and bad arguments."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from threelc import codec

from codec_model import F32, HEADER, TILE, bits, gradient_like, ref_unpack


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
