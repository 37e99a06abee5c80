// Malformed blocks (formats v1 and raw): every class of format violation is refused by validate,
// decode and decode_add with a message that names the problem, and the destination is left
// untouched. Format v2: malformed_tiled_test.cc; random mutations: malformed_mutation_test.cc
// (the three are also built with ASan + UBSan as the ctest `compression_malformed_sanitized`).
#include <gtest/gtest.h>

#include "malformed_blocks.h"

namespace threelc::compression::malformed_blocks {
namespace {

TEST(Malformed, BaseBlocksAreValid) {
  expect_valid(two_tile_block(), kTwoTileCount);
  expect_valid(two_tile_block(), kAnyCount);
  expect_valid(encode_block({1.0f, -0.5f, 0.25f}), 3);
  expect_valid(raw_block({1.0f, 2.0f}), 2);
}

TEST(Malformed, ShorterThanHeader) {
  const Bytes valid = encode_block({1.0f, -1.0f, 0.0f});
  for (size_t size = 0; size < kHeaderBytes; ++size) {
    expect_rejected(Bytes(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(size)), 3,
                    "shorter than the 16-byte header");
  }
  expect_rejected(Bytes(), kAnyCount, "shorter than the 16-byte header");
}

TEST(Malformed, UnknownFormat) {
  for (uint8_t format : std::initializer_list<uint8_t>{3, 4, 0x81, 0xFF}) {
    Bytes b = encode_block({1.0f, -1.0f});
    b[kFormatAt] = format;
    expect_rejected(b, 2, "format " + std::to_string(format));
  }
}

TEST(Malformed, NonZeroFlags) {
  for (uint8_t flags : std::initializer_list<uint8_t>{1, 0x80}) {
    Bytes b = two_tile_block();
    b[kFlagsAt] = flags;
    expect_rejected(b, kTwoTileCount, "flags");
    Bytes r = raw_block({1.0f});
    r[kFlagsAt] = flags;
    expect_rejected(r, 1, "flags");
  }
}

TEST(Malformed, NonZeroReserved) {
  for (uint16_t reserved : std::initializer_list<uint16_t>{1, 0x100, 0xFFFF}) {
    Bytes b = two_tile_block();
    set_u16(b, kReservedAt, reserved);
    expect_rejected(b, kTwoTileCount, "reserved");
    Bytes r = raw_block({1.0f});
    set_u16(r, kReservedAt, reserved);
    expect_rejected(r, 1, "block reserved field is " + std::to_string(reserved));
  }
}

TEST(Malformed, CountDiffersFromExpected) {
  expect_rejected(two_tile_block(), kTwoTileCount - 1, "receiver expects");
  expect_rejected(two_tile_block(), kTwoTileCount + 1, "receiver expects");
  expect_rejected(two_tile_block(), 0, "receiver expects 0");
  expect_rejected(raw_block({1.0f, 2.0f}), 3, "receiver expects 3");
  // A header count changed in flight: wrong against the receiver's count.
  Bytes b = encode_block({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  set_u32(b, kCountAt, 5);
  expect_rejected(b, 6, "holds 5 values");
}

TEST(Malformed, RawWithNonZeroScale) {
  for (uint32_t scale : {0x3F800000u, 0x80000000u /* -0.0 */, 0x7FC00000u, 0x00000001u}) {
    Bytes b = raw_block({1.0f, 2.0f});
    set_u32(b, kScaleAt, scale);
    expect_rejected(b, 2, "raw block has scale");
  }
}

TEST(Malformed, RawWithWrongPayloadBytes) {
  for (uint32_t payload : {0u, 4u, 12u, 0xFFFFFFFFu}) {
    Bytes b = raw_block({1.0f, 2.0f});
    set_u32(b, kPayloadAt, payload);
    expect_rejected(b, 2, "declares " + std::to_string(payload) + " payload bytes, expected 8");
  }
}

TEST(Malformed, RawWithWrongSize) {
  Bytes longer = raw_block({1.0f, 2.0f});
  longer.push_back(0);
  expect_rejected(longer, 2, "is 25 bytes, expected 24");
  Bytes shorter = raw_block({1.0f, 2.0f});
  shorter.pop_back();
  expect_rejected(shorter, 2, "is 23 bytes, expected 24");
  // A huge count with a short block: the size check, not a read past the end.
  Bytes huge = raw_block({1.0f});
  set_u32(huge, kCountAt, 0x40000000u);
  set_u32(huge, kPayloadAt, 0);
  expect_rejected(huge, kAnyCount, "payload bytes");
}

TEST(Malformed, ThreeLCWithBadScale) {
  const uint32_t bad[] = {0x7FC00000u,          0xFFC00001u,          0x7F800000u, 0xFF800000u,
                          0xBF800000u /* -1 */, 0x80000000u /* -0 */, 0x80000001u};
  for (uint32_t scale : bad) {
    Bytes b = two_tile_block();
    set_u32(b, kScaleAt, scale);
    expect_rejected(b, kTwoTileCount, "3LC block has scale");
  }
  // Zero, subnormal and the largest finite scale are valid.
  for (uint32_t scale : {0u, 1u, 0x7F7FFFFFu}) {
    Bytes b = two_tile_block();
    set_u32(b, kScaleAt, scale);
    expect_valid(b, kTwoTileCount);
  }
}

TEST(Malformed, TruncatedTileTable) {
  const Bytes valid = two_tile_block();
  for (size_t size : {16u, 17u, 18u, 19u}) {
    Bytes b(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(size));
    expect_rejected(b, kTwoTileCount, "too short for its 2-entry tile table");
  }
  // A count whose tile table alone would be 2 * 209716 bytes.
  Bytes b = encode_block({1.0f});
  set_u32(b, kCountAt, 0xFFFFFFFFu);
  expect_rejected(b, kAnyCount, "tile table");
}

TEST(Malformed, PayloadLengthMismatch) {
  Bytes longer = two_tile_block();
  longer.push_back(121);
  expect_rejected(longer, kTwoTileCount, "declares 296 payload bytes but carries 297");
  Bytes shorter = two_tile_block();
  shorter.pop_back();
  expect_rejected(shorter, kTwoTileCount, "declares 296 payload bytes but carries 295");
  Bytes field = two_tile_block();
  set_u32(field, kPayloadAt, 0xFFFFFFFFu);
  expect_rejected(field, kTwoTileCount, "payload bytes but carries");
  // n = 0 with payload bytes.
  Bytes empty = encode_block({});
  ASSERT_EQ(empty.size(), kHeaderBytes);
  empty.push_back(121);
  set_u32(empty, kPayloadAt, 1);
  expect_rejected(empty, 0, "tile lengths sum to 0 bytes, header declares 1");
}

TEST(Malformed, TileLengthsDoNotSumToPayload) {
  // One more payload byte than the tiles claim (and than the header's payload covers).
  Bytes b = two_tile_block();
  b.push_back(121);
  set_u32(b, kPayloadAt, get_u32(b, kPayloadAt) + 1);
  expect_rejected(b, kTwoTileCount, "tile lengths sum to 296 bytes, header declares 297");
  // A tile that ends past the payload.
  Bytes past = two_tile_block();
  set_u16(past, kTableAt + 2, 3);
  expect_rejected(past, kTwoTileCount, "tile 1 of 2 ends at payload byte 297, past the payload");
  Bytes first = two_tile_block();
  set_u16(first, kTableAt, 0xFFFF);
  expect_rejected(first, kTwoTileCount, "tile 0 of 2 ends at payload byte 65535");
}

TEST(Malformed, TileExpandsToTooManyGroups) {
  // A literal replaced by a run byte: tile 1 = {121, 40} -> {121, 243} expands to 3 > 2.
  Bytes b = two_tile_block();
  b.back() = 243;
  expect_rejected(b, kTwoTileCount, "tile 1 expands to 3 groups, expected 2");
  // Tile 0's first literal replaced by 255: 4096 - 1 + 14.
  Bytes c = two_tile_block();
  c[20] = 255;
  expect_rejected(c, kTwoTileCount, "tile 0 expands to 4109 groups, expected 4096");
  // Single-tile block n = 7 (g = 2), bytes {x, y} -> {x, 255}.
  Bytes d = encode_block({1.0f, -1.0f, 0.5f, 0.75f, 0.0f, 0.0f, 1.0f});
  ASSERT_EQ(d.size(), 20u);
  d[19] = 255;
  expect_rejected(d, 7, "tile 0 expands to 15 groups, expected 2");
}

TEST(Malformed, TileExpandsToTooFewGroups) {
  // A 255 (14 groups) replaced by 121 (1 group).
  Bytes b = two_tile_block();
  b[21] = 121;
  expect_rejected(b, kTwoTileCount, "tile 0 expands to 4083 groups, expected 4096");
  // A byte dropped from the last tile (its length and the payload adjusted to match).
  Bytes c = two_tile_block();
  c.pop_back();
  set_u16(c, kTableAt + 2, 1);
  set_u32(c, kPayloadAt, 295);
  expect_rejected(c, kTwoTileCount, "tile 1 expands to 1 groups, expected 2");
  // An empty tile.
  Bytes d = two_tile_block();
  d.resize(d.size() - 2);
  set_u16(d, kTableAt + 2, 0);
  set_u32(d, kPayloadAt, 294);
  expect_rejected(d, kTwoTileCount, "tile 1 expands to 0 groups, expected 2");
}

TEST(Malformed, RunCrossesTheEndOfATile) {
  // Tile 0 ends with 248 (7 zero groups) and tile 1 starts with 121. Moving the zero group of
  // tile 1 into tile 0's last run (249 = 8 groups) keeps the block's total group count but
  // makes a run cross the tile edge: rejected.
  Bytes b = two_tile_block();
  ASSERT_EQ(b[20 + 293], 248);
  b[20 + 293] = 249;
  b.erase(b.begin() + 20 + 294);  // tile 1's 121
  set_u16(b, kTableAt + 2, 1);
  set_u32(b, kPayloadAt, 295);
  expect_rejected(b, kTwoTileCount, "tile 0 expands to 4097 groups, expected 4096");
  // The same run split across the table: tile 0 claims one byte more (the run byte of tile 1).
  Bytes c = two_tile_block();
  c[20 + 294] = 243;  // tile 1 = {243, 40}
  set_u16(c, kTableAt, 295);
  set_u16(c, kTableAt + 2, 1);
  expect_rejected(c, kTwoTileCount, "tile 0 expands to 4098 groups, expected 4096");
  // Within a short last tile: g = 2, bytes {202, 243} expand past g.
  Bytes d = encode_block({1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
  ASSERT_EQ(d.size(), 20u);
  ASSERT_EQ(d[18], 202);
  ASSERT_EQ(d[19], 121);
  d[19] = 243;
  expect_rejected(d, 7, "tile 0 expands to 3 groups, expected 2");
}

}  // namespace
}  // namespace threelc::compression::malformed_blocks
