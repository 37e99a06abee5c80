#!/usr/bin/env python3
"""Writes the decode fuzzer's seed corpus (tests/fuzz/corpus/decode/).

Run once; the files are committed. The blocks are built here straight from the format spec
(docs/DESIGN.md, "The 3LC codec", and docs/WIRE_FORMAT.md for the bytes of version 1 and of
version 2, a scale per tile), independently of the C++ encoder: a few valid 3LC (v1 and v2)
and raw blocks, and one block of each malformed class the decoder must refuse, so that
libFuzzer starts with every validation branch covered. Keep the seeds small.

    python3 tests/fuzz/make_seed_corpus.py [OUT_DIR]
"""
import math
import os
import struct
import sys

G = 4096
TILE = 5 * G


def quantize(values, scale):
    h = struct.unpack("<f", struct.pack("<f", 0.5 * scale))[0]
    return [1 if a > h else (-1 if a < -h else 0) for a in values]


def tile_bytes(q):
    """Quartic packing plus zero-run encoding of one tile's trits (rules 6 and 7)."""
    g = (len(q) + 4) // 5
    q = q + [0] * (5 * g - len(q))
    groups = [
        81 * (q[j] + 1) + 27 * (q[j + g] + 1) + 9 * (q[j + 2 * g] + 1) + 3 * (q[j + 3 * g] + 1)
        + (q[j + 4 * g] + 1)
        for j in range(g)
    ]
    out = bytearray()
    j = 0
    while j < g:
        if groups[j] != 121:
            out.append(groups[j])
            j += 1
            continue
        k = 0
        while j < g and groups[j] == 121:
            k += 1
            j += 1
        out += bytes([255]) * (k // 14)
        r = k % 14
        if r == 1:
            out.append(121)
        elif r >= 2:
            out.append(243 + r - 2)
    return bytes(out)


def threelc_block(values, sparsity=1.0):
    """A 3LC block of exactly representable values (no error buffer)."""
    m = max((abs(v) for v in values), default=0.0)
    scale = struct.unpack("<f", struct.pack("<f", m * sparsity))[0]
    q = quantize(values, scale)
    tiles = [tile_bytes(q[b:b + TILE]) for b in range(0, len(q), TILE)]
    payload = b"".join(tiles)
    header = struct.pack("<BBHIfI", 1, 0, 0, len(values), scale, len(payload))
    table = b"".join(struct.pack("<H", len(t)) for t in tiles)
    return header + table + payload


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def tiled_block(values, scale_tile, sparsity=1.0):
    """A 3LC v2 block: a scale per tile of `scale_tile` values (a multiple of 5), each tile
    quantized with its own scale and packed as a v1 tile; the header's scale is the largest."""
    tiles, scales = [], []
    for b in range(0, len(values), scale_tile):
        part = values[b:b + scale_tile]
        scale = f32(max(abs(v) for v in part) * sparsity)
        scales.append(scale)
        tiles.append(tile_bytes(quantize(part, scale)))
    payload = b"".join(tiles)
    header = struct.pack("<BBHIfI", 2, 0, scale_tile // 5, len(values), max(scales, default=0.0),
                         len(payload))
    lengths = b"".join(struct.pack("<H", len(t)) for t in tiles)
    table = b"".join(struct.pack("<f", s) for s in scales)
    return header + lengths + table + payload


def raw_block(values):
    header = struct.pack("<BBHIfI", 0, 0, 0, len(values), 0.0, 4 * len(values))
    return header + b"".join(struct.pack("<f", v) for v in values)


def patched(block, offset, fmt, value):
    b = bytearray(block)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "decode")
    os.makedirs(out_dir, exist_ok=True)

    seven = [0.75, 0.25, -0.75, 1.0, 0.25, -0.25, -1.0]
    sparse = [0.0] * (TILE + 7)
    sparse[0] = 1.0
    sparse[TILE + 1] = -1.0
    runs = [0.0] * 200
    for i in (0, 13, 14, 44, 199):
        runs[i] = 1.0 if i % 2 == 0 else -0.75

    valid7 = threelc_block(seven)
    valid_two_tiles = threelc_block(sparse)
    # v2, tiles of 5: {1, -0.75, 0.25, 0.5, -1}, all zero, {-0.25, 0.125} (as in the unit tests).
    twelve = [1.0, -0.75, 0.25, 0.5, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.25, 0.125]
    tiled12 = tiled_block(twelve, 5)
    assert len(tiled12) == 16 + 6 * 3 + 3, "unexpected v2 layout"
    scales12 = 16 + 2 * 3  # the scale table of tiled12
    seeds = {
        "valid_3lc_empty": threelc_block([]),
        "valid_3lc_one": threelc_block([1.0]),
        "valid_3lc_seven": valid7,
        "valid_3lc_runs": threelc_block(runs),
        "valid_3lc_two_tiles": valid_two_tiles,
        "valid_3lc_sparsity": threelc_block(seven, 1.5),
        "valid_raw_three": raw_block([1.0, -2.0, 0.5]),
        "valid_raw_nonfinite": raw_block([math.inf, math.nan, -0.0]),
        "valid_raw_empty": raw_block([]),
        "bad_short_header": valid7[:11],
        "valid_3lc2_three_tiles": tiled12,
        "valid_3lc2_groups": tiled_block(seven * 6, 10, 1.5),
        "valid_3lc2_runs": tiled_block(runs, 75),
        "valid_3lc2_full_tiles": tiled_block(sparse, TILE),
        "bad_format": patched(valid7, 0, "<B", 3),
        "bad_flags": patched(valid7, 1, "<B", 1),
        "bad_reserved": patched(valid7, 2, "<H", 1),
        "bad_count": patched(valid7, 4, "<I", 8),
        "bad_scale_nan": patched(valid7, 8, "<I", 0x7FC00000),
        "bad_scale_negative": patched(valid7, 8, "<f", -1.0),
        "bad_raw_scale": patched(raw_block([1.0]), 8, "<f", 1.0),
        "bad_raw_payload": patched(raw_block([1.0]), 12, "<I", 8),
        "bad_raw_size": raw_block([1.0, 2.0])[:-1],
        "bad_tile_table": valid_two_tiles[:18],
        "bad_payload_length": valid7 + b"\x79",
        "bad_tile_sum": patched(valid7 + b"\x79", 12, "<I", 3),
        "bad_too_many_groups": valid7[:-1] + b"\xf3",
        "bad_too_few_groups": patched(patched(valid7[:-1], 12, "<I", 1), 16, "<H", 1),
        "bad_reserved_raw": patched(raw_block([1.0]), 2, "<H", 1),
        "bad_3lc2_groups_zero": patched(tiled12, 2, "<H", 0),
        "bad_3lc2_groups_large": patched(tiled12, 2, "<H", 4097),
        "bad_3lc2_tile_scale_nan": patched(tiled12, scales12 + 4, "<I", 0x7FC00000),
        "bad_3lc2_tile_scale_negative": patched(tiled12, scales12 + 8, "<f", -0.25),
        "bad_3lc2_scale_table": tiled12[:scales12 + 5],
        "bad_3lc2_too_many_groups": tiled12[:-2] + b"\xf3" + tiled12[-1:],
        "bad_3lc2_tile_sum": patched(tiled12 + b"\x79", 12, "<I", 4),
        # Tile 0's last run grows by one group (248 -> 249) and tile 1 loses its leading 121:
        # the run would cross the tile edge.
        "bad_run_crosses_tile": None,
    }
    # sparse: tile 0 = 202, 292 x 255, 248; tile 1 = 121, 40 (as in the unit tests).
    b = bytearray(valid_two_tiles)
    assert b[20 + 293] == 248 and b[20 + 294] == 121, "unexpected two-tile layout"
    b[20 + 293] = 249
    del b[20 + 294]
    struct.pack_into("<H", b, 18, 1)
    struct.pack_into("<I", b, 12, len(b) - 20)
    seeds["bad_run_crosses_tile"] = bytes(b)

    for name, data in seeds.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {out_dir}")


if __name__ == "__main__":
    main()
