// The 3LC block format, version 1 (see docs/WIRE_FORMAT.md and shared/DESIGN.md).
// Pure data: constants, the 16-byte header, and size arithmetic. No I/O, no validation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace threelc::compression {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "block format is little-endian");

enum class Format : uint8_t { kRaw = 0, kThreeLC = 1 };

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

// The header exactly as it is on the wire (little-endian).
struct BlockHeader {
  uint8_t format;          // Format
  uint8_t flags;           // 0
  uint16_t reserved;       // 0
  uint32_t count;          // n, number of values
  float scale;             // 3LC: M * s; raw: 0
  uint32_t payload_bytes;  // 3LC: sum of tile lengths; raw: 4 * n
};
static_assert(sizeof(BlockHeader) == kHeaderBytes);

constexpr size_t tile_count(size_t n) { return (n + kTileValues - 1) / kTileValues; }

// Values in tile `t` of a block of n values.
constexpr size_t tile_values(size_t n, size_t t) {
  const size_t begin = t * kTileValues;
  return n - begin < kTileValues ? n - begin : kTileValues;
}

// Groups g of a tile holding `values` values (padded with zero trits to a multiple of 5).
constexpr size_t tile_groups(size_t values) {
  return (values + kTritsPerGroup - 1) / kTritsPerGroup;
}

constexpr size_t raw_block_bytes(size_t n) { return kHeaderBytes + 4 * n; }

// Upper bound of any block (3LC or raw) encoding n values: a raw block is always the largest,
// because a 3LC tile never encodes to more bytes than it has groups.
constexpr size_t max_block_bytes(size_t n) { return raw_block_bytes(n); }

}  // namespace threelc::compression
