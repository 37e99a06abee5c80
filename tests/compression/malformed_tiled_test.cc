// Malformed blocks of format v2 (a scale per tile): groups per tile out of range, bad tile
// scales, truncated tables, payload and tile lengths that disagree.
#include <gtest/gtest.h>

#include "malformed_blocks.h"

namespace threelc::compression::malformed_blocks {
namespace {

TEST(Malformed, TiledBaseBlocksAreValid) {
  BlockInfo info;
  ASSERT_TRUE(validate(three_tile_block(), kThreeTileCount, &info).ok());
  EXPECT_EQ(info.format, Format::kThreeLCTiled);
  EXPECT_EQ(info.count, 12u);
  EXPECT_EQ(info.scale, 1.0f);
  EXPECT_EQ(info.payload_bytes, 3u);
  EXPECT_EQ(info.tile_values, 5u);
  expect_valid(three_tile_block(), kAnyCount);
  std::vector<float> x(20487);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t scale_tile : {size_t{5}, size_t{1280}, size_t{20480}}) {
    const Bytes b = encode_block(x, scale_tile);
    ASSERT_TRUE(validate(b, x.size(), &info).ok());
    EXPECT_EQ(info.format, Format::kThreeLCTiled);
    EXPECT_EQ(info.tile_values, scale_tile);
  }
  // Blocks the encoder writes as v1 (no values, one tile) are valid in v2 too.
  expect_valid(tiled_block(0, 1, 0u, {}), 0);
  expect_valid(tiled_block(4, 4096, 0x3F800000u, {{0x3F800000u, {172}}}), 4);
  // Zero, subnormal and the largest finite tile scales are valid, and decode uses each tile's.
  for (uint32_t scale : {0u, 1u, 0x7F7FFFFFu}) {
    Bytes b = three_tile_block();
    set_u32(b, kScalesAt + 8, scale);  // tile 2's
    expect_valid(b, kThreeTileCount);
    std::vector<float> d(kThreeTileCount, kSentinel);
    ASSERT_TRUE(decode(b, kThreeTileCount, d.data()).ok());
    EXPECT_EQ(d[10], -std::bit_cast<float>(scale));
    EXPECT_EQ(d[0], 1.0f);
  }
}

TEST(Malformed, TiledGroupsPerTileOutOfRange) {
  for (uint16_t groups : std::initializer_list<uint16_t>{0, 4097, 0x8000, 0xFFFF}) {
    Bytes b = three_tile_block();
    set_u16(b, kReservedAt, groups);
    expect_rejected(
        b, kThreeTileCount,
        "3LC v2 block has " + std::to_string(groups) + " groups per tile, expected 1 to 4096");
  }
  // A v1 block relabelled as v2: its reserved field, 0, is no group count.
  Bytes v1 = encode_block({1.0f, -1.0f});
  v1[kFormatAt] = 2;
  expect_rejected(v1, 2, "0 groups per tile");
  // Another valid G changes the tile count and so where the tables end.
  Bytes two = three_tile_block();
  set_u16(two, kReservedAt, 2);  // 2 tiles of 10: a 12-byte table
  expect_rejected(two, kThreeTileCount, "declares 3 payload bytes but carries 9");
  Bytes one = three_tile_block();
  set_u16(one, kReservedAt, 3);  // 1 tile of 15: a 6-byte table
  expect_rejected(one, kThreeTileCount, "declares 3 payload bytes but carries 15");
}

TEST(Malformed, TiledBadTileScale) {
  const uint32_t bad[] = {0x7FC00000u,          0xFFC00001u,          0x7F800000u, 0xFF800000u,
                          0xBF800000u /* -1 */, 0x80000000u /* -0 */, 0x80000001u};
  for (size_t t = 0; t < 3; ++t) {
    for (uint32_t scale : bad) {
      Bytes b = three_tile_block();
      set_u32(b, kScalesAt + 4 * t, scale);
      expect_rejected(b, kThreeTileCount, "tile " + std::to_string(t) + " has scale");
    }
  }
  // The header's scale is checked as in v1.
  for (uint32_t scale : bad) {
    Bytes b = three_tile_block();
    set_u32(b, kScaleAt, scale);
    expect_rejected(b, kThreeTileCount, "3LC block has scale");
  }
}

TEST(Malformed, TiledTruncatedTables) {
  // The table is 3 lengths and 3 scales: cut in either part.
  const Bytes valid = three_tile_block();
  for (size_t size = kHeaderBytes; size < kScalesAt + 12; ++size) {
    Bytes b(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(size));
    expect_rejected(b, kThreeTileCount, "too short for its 3-entry tile table");
  }
  // A count that needs one more tile: 4 entries, 24 bytes, than the 21 there.
  Bytes more = three_tile_block();
  set_u32(more, kCountAt, 16);
  expect_rejected(more, kAnyCount, "too short for its 4-entry tile table");
  // A count whose tables alone would be 6 * 858993460 bytes.
  Bytes huge = three_tile_block();
  set_u32(huge, kCountAt, 0xFFFFFFFFu);
  expect_rejected(huge, kAnyCount, "tile table");
}

TEST(Malformed, TiledPayloadAndTileLengths) {
  Bytes longer = three_tile_block();
  longer.push_back(121);
  expect_rejected(longer, kThreeTileCount, "declares 3 payload bytes but carries 4");
  Bytes shorter = three_tile_block();
  shorter.pop_back();
  expect_rejected(shorter, kThreeTileCount, "declares 3 payload bytes but carries 2");
  // One payload byte more than the tiles claim.
  Bytes extra = three_tile_block();
  extra.push_back(121);
  set_u32(extra, kPayloadAt, 4);
  expect_rejected(extra, kThreeTileCount, "tile lengths sum to 3 bytes, header declares 4");
  // A tile that ends past the payload.
  Bytes past = three_tile_block();
  set_u16(past, kTableAt + 4, 2);
  expect_rejected(past, kThreeTileCount, "tile 2 of 3 ends at payload byte 4, past the payload");
  // The zero group of tile 1 turned into a run of 2.
  Bytes many = three_tile_block();
  many[35] = 243;
  expect_rejected(many, kThreeTileCount, "tile 1 expands to 2 groups, expected 1");
  // Tile 0 empty, tile 1 claiming its byte too.
  Bytes few = three_tile_block();
  set_u16(few, kTableAt, 0);
  set_u16(few, kTableAt + 2, 2);
  expect_rejected(few, kThreeTileCount, "tile 0 expands to 0 groups, expected 1");
  // A run across a tile edge: n = 20, G = 2, tiles {202, 121} and {121, 40} written as
  // {202, 243} and {40}: the right number of groups in all, 3 and 1 per tile.
  expect_rejected(tiled_block(20, 2, 0x3F800000u, {{0x3F800000u, {202, 243}}, {0x3F800000u, {40}}}),
                  20, "tile 0 expands to 3 groups, expected 2");
  // The count differs from the receiver's.
  expect_rejected(three_tile_block(), 13, "receiver expects 13");
}

}  // namespace
}  // namespace threelc::compression::malformed_blocks
