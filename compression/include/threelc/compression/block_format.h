// The 3LC block formats: version 1, one scale per block (the paper's), and version 2, one scale
// per tile of a size the encoder chooses (see docs/WIRE_FORMAT.md).
// Pure data: constants, the 16-byte header, and size arithmetic. No I/O, no validation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace threelc::compression {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "block format is little-endian");

// kThreeLC is version 1 (one scale, tiles of kTileValues); kThreeLCTiled is version 2 (a scale
// per tile, tiles of 5 * G values with G in the header's reserved field).
enum class Format : uint8_t { kRaw = 0, kThreeLC = 1, kThreeLCTiled = 2 };

inline constexpr size_t kHeaderBytes = 16;
inline constexpr size_t kGroupsPerTile = 4096;  // G
inline constexpr size_t kTritsPerGroup = 5;
inline constexpr size_t kTileValues = kTritsPerGroup * kGroupsPerTile;  // 5 * G
inline constexpr uint8_t kZeroGroup = 121;                              // all five trits zero
inline constexpr uint8_t kMaxGroupByte = 242;                           // largest literal group
inline constexpr uint8_t kFirstRunByte = 243;  // 243 + (r - 2): a run of r = 2..13 zero groups
inline constexpr uint8_t kRun14Byte = 255;     // a run of 14 zero groups
inline constexpr size_t kRun14 = 14;
inline constexpr size_t kTileLengthBytes = 2;  // one u16 per tile in the tile table
inline constexpr size_t kTileScaleBytes = 4;   // v2: one f32 per tile after the length table

// The header exactly as it is on the wire (little-endian).
struct BlockHeader {
  uint8_t format;          // Format
  uint8_t flags;           // 0
  uint16_t reserved;       // v2: G, groups per tile (1 .. kGroupsPerTile); otherwise 0
  uint32_t count;          // n, number of values
  float scale;             // 3LC: M * s (v2: the largest tile scale); raw: 0
  uint32_t payload_bytes;  // 3LC: sum of tile lengths; raw: 4 * n
};
static_assert(sizeof(BlockHeader) == kHeaderBytes);

// Tiles of a block of n values, `per_tile` values each (v1: kTileValues).
constexpr size_t tile_count(size_t n, size_t per_tile = kTileValues) {
  return (n + per_tile - 1) / per_tile;
}

// Values in tile `t` of a block of n values.
constexpr size_t tile_values(size_t n, size_t t, size_t per_tile = kTileValues) {
  const size_t begin = t * per_tile;
  return n - begin < per_tile ? n - begin : per_tile;
}

// Bytes of the tile table of a block of `tiles` tiles: lengths, and in v2 scales.
constexpr size_t tile_table_bytes(size_t tiles, bool scale_per_tile) {
  return tiles * (kTileLengthBytes + (scale_per_tile ? kTileScaleBytes : 0));
}

// Groups g of a tile holding `values` values (padded with zero trits to a multiple of 5).
constexpr size_t tile_groups(size_t values) {
  return (values + kTritsPerGroup - 1) / kTritsPerGroup;
}

constexpr size_t raw_block_bytes(size_t n) { return kHeaderBytes + 4 * n; }

// Upper bound of any block (3LC or raw) encoding n values: a raw block is always the largest,
// because a 3LC tile never encodes to more bytes than it has groups (v2's smallest tiles, 5
// values, take at most 1 + 6 bytes, against 20 raw).
constexpr size_t max_block_bytes(size_t n) { return raw_block_bytes(n); }

}  // namespace threelc::compression
