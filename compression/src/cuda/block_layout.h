// Internal: where the parts of a 3LC block lie, format v1 or v2 (docs/WIRE_FORMAT.md), for the
// CUDA kernels and the host code around them alike. Version 1 is the case of one scale: tiles
// of kTileValues values and no table of tile scales.
#pragma once

#include <cstddef>
#include <cstdint>

#include "host_device.h"
#include "threelc/compression/block_format.h"

namespace threelc::compression::cuda::detail {

struct BlockLayout {
  size_t count = 0;               // n, values in the block
  size_t per_tile = kTileValues;  // values per tile: kTileValues (v1), 5 * G (v2)
  bool tiled = false;             // v2: a scale per tile, in a table after the lengths

  THREELC_HOST_DEVICE size_t tiles() const { return tile_count(count, per_tile); }
  // G: groups of a full tile, and the most bytes any tile encodes to.
  THREELC_HOST_DEVICE size_t groups_per_tile() const { return per_tile / kTritsPerGroup; }
  THREELC_HOST_DEVICE size_t first_value(size_t t) const { return t * per_tile; }
  THREELC_HOST_DEVICE size_t values_in(size_t t) const { return tile_values(count, t, per_tile); }
  // Offsets in the block: tile t's u16 length at lengths_at() + 2t, v2's f32 scale at
  // scales_at() + 4t (neither need be aligned), the tiles' bytes from payload_at().
  THREELC_HOST_DEVICE size_t lengths_at() const { return kHeaderBytes; }
  THREELC_HOST_DEVICE size_t scales_at() const { return kHeaderBytes + tiles() * kTileLengthBytes; }
  THREELC_HOST_DEVICE size_t payload_at() const {
    return kHeaderBytes + tile_table_bytes(tiles(), tiled);
  }
  // The bytes of the largest 3LC block of this layout: every tile all literals.
  THREELC_HOST_DEVICE size_t max_bytes() const {
    return payload_at() + tiles() * groups_per_tile();
  }
  THREELC_HOST_DEVICE Format format() const {
    return tiled ? Format::kThreeLCTiled : Format::kThreeLC;
  }
  // The header's reserved field: G in v2, 0 in v1.
  THREELC_HOST_DEVICE uint16_t reserved() const {
    return static_cast<uint16_t>(tiled ? groups_per_tile() : 0);
  }
};

// The layout the CPU encoder (encode.cc) writes for n values and EncodeOptions::scale_tile: v2
// when a scale tile is asked for and the block has more than one tile of it, else v1 (a block
// of one tile is quantized the same either way, and v1 is 4 bytes shorter).
inline BlockLayout encode_layout(size_t n, size_t scale_tile) {
  const bool tiled = scale_tile != 0 && n > scale_tile;
  return BlockLayout{n, tiled ? scale_tile : kTileValues, tiled};
}

// The layout of a 3LC block of `format` holding n values; `per_tile` counts only for v2.
inline BlockLayout block_layout(Format format, size_t n, size_t per_tile) {
  const bool tiled = format == Format::kThreeLCTiled;
  return BlockLayout{n, tiled ? per_tile : kTileValues, tiled};
}

}  // namespace threelc::compression::cuda::detail
