"""An independent numpy model of 3LC block format version 1 as docs/WIRE_FORMAT.md gives it
("Encoding a block of n values", "Layout": quantization, base-3^5 packing, zero-run encoding,
serialization): what the tests of threelc.codec expect, never taken from the library itself;
and the inputs they encode."""

from __future__ import annotations

import itertools
import struct

import numpy as np

F32 = np.float32
G = 4096                 # groups per tile
TILE = 5 * G             # values per tile
HEADER = struct.Struct("<BBHIfI")  # format, flags, reserved, n, scale, payload_bytes


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
