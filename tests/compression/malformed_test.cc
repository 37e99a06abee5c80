// Malformed blocks (formats v1, v2 and raw): every class of format violation is refused by
// validate, decode and decode_add with a message that names the problem, and the destination is
// left untouched.
// A randomized mutation loop over valid blocks checks that nothing crashes (this file is also
// built with ASan + UBSan as the ctest `compression_malformed_sanitized`).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"
#include "threelc/codec.h"
#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"

namespace threelc::compression {
namespace {

using test_support::Bytes;
using test_support::tiled_block;

void set_u16(Bytes& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xFF);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}
void set_u32(Bytes& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>((v >> (8 * i)) & 0xFF);
}
uint16_t get_u16(const Bytes& b, size_t at) {
  return static_cast<uint16_t>(b[at] | static_cast<unsigned>(b[at + 1]) << 8);
}
uint32_t get_u32(const Bytes& b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}

// Header field offsets (docs/WIRE_FORMAT.md, "Layout": format u8, flags u8, reserved u16,
// n u32, scale f32, payload_bytes u32), then the u16 tile table.
constexpr size_t kFormatAt = 0, kFlagsAt = 1, kReservedAt = 2, kCountAt = 4, kScaleAt = 8,
                 kPayloadAt = 12, kTableAt = 16;

// scale_tile 0 writes format v1, otherwise v2 (when there is more than one tile).
Bytes encode_block(const std::vector<float>& x, size_t scale_tile = 0) {
  Bytes out(max_block_bytes(x.size()));
  EncodedBlock result;
  const Status status = encode(Values{x.data(), DType::kFloat32, x.size()}, nullptr,
                               EncodeOptions{1.0f, Isa::kAuto, scale_tile}, out, &result);
  EXPECT_TRUE(status.ok()) << status.message();
  out.resize(result.bytes);
  return out;
}

Bytes raw_block(const std::vector<float>& x) {
  Bytes out(raw_block_bytes(x.size()));
  EncodedBlock result;
  EXPECT_TRUE(encode_raw(Values{x.data(), DType::kFloat32, x.size()}, out, &result).ok());
  return out;
}

// n = 20480 + 7, two tiles. Tile 0: group 0 = 202, 4095 zero groups (292 x 255, then 248);
// tile 1: {121, 40}. Written by hand (see known_answer_test.cc).
Bytes two_tile_block() {
  Bytes b = {0x01, 0x00, 0x00, 0x00};
  b.resize(16);
  set_u32(b, kCountAt, kTileValues + 7);
  set_u32(b, kScaleAt, 0x3F800000u);
  set_u32(b, kPayloadAt, 294 + 2);
  b.resize(20);
  set_u16(b, kTableAt, 294);
  set_u16(b, kTableAt + 2, 2);
  b.push_back(202);
  b.insert(b.end(), 292, 255);
  b.push_back(248);
  b.push_back(121);
  b.push_back(40);
  return b;
}

constexpr size_t kTwoTileCount = kTileValues + 7;

// Format v2, n = 12, G = 1 (tiles of 5 values): tile 0 {174} with scale 1, tile 1 {121} (all
// zero) with scale 0, tile 2 {40} with scale 0.25; the header's scale is the largest, 1.
// Written by hand (see known_answer_test.cc). Lengths at 16, 18, 20; scales at 22, 26, 30;
// the tiles at 34, 35, 36.
Bytes three_tile_block() {
  return tiled_block(12, 1, 0x3F800000u,
                     {{0x3F800000u, {174}}, {0x00000000u, {121}}, {0x3E800000u, {40}}});
}
constexpr size_t kThreeTileCount = 12;
constexpr size_t kScalesAt = kTableAt + 6;  // three_tile_block's scale table: 3 lengths on

// A float pattern that no successful decode of these blocks would produce by accident.
constexpr float kSentinel = -12345.678f;

// Checks that `block` is refused with a message containing `needle` by validate, decode and
// decode_add (every ISA) and the C ABI, with the destination untouched.
void expect_rejected(const Bytes& block, size_t expected_count, const std::string& needle) {
  SCOPED_TRACE("expecting \"" + needle + "\" for a block of " + std::to_string(block.size()) +
               " bytes, expected count " + std::to_string(expected_count));
  BlockInfo info{Format::kThreeLC, 4242, 42.0f, 4242};
  const Status status = validate(block, expected_count, &info);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(needle), std::string::npos) << status.message();
  EXPECT_EQ(info.count, 4242u) << "info written on failure";

  const size_t n = expected_count == kAnyCount ? 64 : expected_count;
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(std::string(isa_name(isa)));
    std::vector<float> dst(n + 16, kSentinel);
    const Status d = decode(block, expected_count, dst.data(), DecodeOptions{isa});
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.message(), status.message());
    for (size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], kSentinel) << "decode wrote " << i;
    const Status a = decode_add(block, expected_count, 0.5f, dst.data(), DecodeOptions{isa});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.message(), status.message());
    for (size_t i = 0; i < dst.size(); ++i) {
      ASSERT_EQ(dst[i], kSentinel) << "decode_add wrote " << i;
    }
  }
  std::vector<float> dst(n + 16, kSentinel);
  const size_t c_expected = expected_count == kAnyCount ? SIZE_MAX : expected_count;
  EXPECT_EQ(threelc_codec_decode(block.data(), block.size(), c_expected, dst.data()),
            THREELC_EMALFORMED);
  EXPECT_EQ(std::string(threelc_codec_last_error()), status.message());
  EXPECT_EQ(threelc_codec_decode_add(block.data(), block.size(), c_expected, 1.0f, dst.data()),
            THREELC_EMALFORMED);
  for (size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], kSentinel) << "C ABI wrote " << i;
}

void expect_valid(const Bytes& block, size_t expected_count) {
  const Status status = validate(block, expected_count, nullptr);
  ASSERT_TRUE(status.ok()) << status.message();
}

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

// --- format v2 (a scale per tile) ---------------------------------------------------------

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

// --- randomized mutations -----------------------------------------------------------------

std::vector<Bytes> base_blocks() {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<Bytes> blocks = {two_tile_block(), raw_block({}), raw_block({1.0f, -2.0f, 3.0f}),
                               encode_block({})};
  for (size_t n : {1u, 7u, 64u, 20480u + 7u, 45000u}) {
    std::vector<float> x(n);
    for (float& v : x) v = unit(rng) < 0.1f ? normal(rng) : 0.0f;
    blocks.push_back(encode_block(x));
    for (float& v : x) v = normal(rng);
    blocks.push_back(encode_block(x));
  }
  // Format v2: tiles of 5, 40 and 1280 values.
  blocks.push_back(three_tile_block());
  for (const auto& [n, scale_tile] :
       {std::pair{size_t{23}, size_t{5}}, std::pair{size_t{333}, size_t{40}},
        std::pair{size_t{3000}, size_t{1280}}}) {
    std::vector<float> x(n);
    for (float& v : x) v = unit(rng) < 0.1f ? normal(rng) : 0.0f;
    blocks.push_back(encode_block(x, scale_tile));
    for (float& v : x) v = normal(rng) * (unit(rng) < 0.5f ? 100.0f : 0.01f);
    blocks.push_back(encode_block(x, scale_tile));
  }
  std::vector<float> x(50);
  for (float& v : x) v = normal(rng);
  blocks.push_back(raw_block(x));
  return blocks;
}

void mutate(std::mt19937& rng, Bytes& b) {
  static const uint8_t interesting[] = {0, 1, 120, 121, 122, 241, 242, 243, 244, 254, 255};
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 8) {
      case 0:  // flip a bit
        if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // an interesting byte anywhere
        if (!b.empty()) b[rng() % b.size()] = interesting[rng() % sizeof interesting];
        break;
      case 2:  // a random byte in the header or tile table
        if (!b.empty()) b[rng() % std::min<size_t>(b.size(), 24)] = static_cast<uint8_t>(rng());
        break;
      case 3:  // truncate
        b.resize(b.empty() ? 0 : rng() % b.size());
        break;
      case 4:  // append
        for (size_t k = 1 + rng() % 3; k > 0; --k) b.push_back(static_cast<uint8_t>(rng()));
        break;
      case 5:  // erase a byte
        if (!b.empty()) b.erase(b.begin() + static_cast<std::ptrdiff_t>(rng() % b.size()));
        break;
      case 6:  // nudge the count or the payload length
        if (b.size() >= kHeaderBytes) {
          const size_t at = rng() % 2 == 0 ? kCountAt : kPayloadAt;
          const int32_t delta = static_cast<int32_t>(rng() % 9) - 4;
          set_u32(b, at, get_u32(b, at) + static_cast<uint32_t>(delta));
        }
        break;
      default:  // nudge a tile length
        if (b.size() >= kTableAt + 2) {
          const int32_t delta = static_cast<int32_t>(rng() % 5) - 2;
          set_u16(b, kTableAt, static_cast<uint16_t>(get_u16(b, kTableAt) + delta));
        }
        break;
    }
  }
}

TEST(Malformed, RandomMutationsNeverCrash) {
  const std::vector<Bytes> bases = base_blocks();
  std::mt19937 rng(777);
  size_t accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    const Bytes& base = bases[rng() % bases.size()];
    const size_t base_count = get_u32(base, kCountAt);
    Bytes b = base;
    mutate(rng, b);
    SCOPED_TRACE("iteration " + std::to_string(iteration));

    BlockInfo info;
    const Status any = validate(b, kAnyCount, &info);
    const Status fixed = validate(b, base_count, nullptr);
    if (any.ok()) {
      EXPECT_EQ(fixed.ok(), info.count == base_count);
    } else {
      EXPECT_FALSE(fixed.ok());
      EXPECT_FALSE(any.message().empty());
    }
    if (!fixed.ok()) {
      EXPECT_FALSE(fixed.message().empty());
    }

    // Decode with the header's count (bounded) and with the base block's count.
    const size_t counts[] = {any.ok() ? info.count : base_count, base_count};
    for (size_t expected : counts) {
      if (expected > (size_t{1} << 23)) continue;
      std::vector<float> reference;
      for (Isa isa : supported_isas()) {
        std::vector<float> dst(expected, kSentinel);
        const Status d = decode(b, expected, dst.data(), DecodeOptions{isa});
        std::vector<float> acc(expected, kSentinel);
        const Status a = decode_add(b, expected, 1.0f, acc.data(), DecodeOptions{isa});
        ASSERT_EQ(d.ok(), a.ok());
        if (!d.ok()) {
          ASSERT_FALSE(d.message().empty());
          for (float v : dst) ASSERT_EQ(v, kSentinel);
          for (float v : acc) ASSERT_EQ(v, kSentinel);
          continue;
        }
        ASSERT_TRUE(any.ok());
        if (info.format == Format::kThreeLC) {
          for (size_t i = 0; i < expected; ++i) {
            ASSERT_TRUE(dst[i] == 0.0f || dst[i] == info.scale || dst[i] == -info.scale) << i;
          }
        } else if (info.format == Format::kThreeLCTiled) {
          // 0 or +-the scale of the value's tile, from the scale table.
          const size_t tiles = tile_count(info.count, info.tile_values);
          for (size_t i = 0; i < expected; ++i) {
            const float scale =
                std::bit_cast<float>(get_u32(b, kTableAt + 2 * tiles + 4 * (i / info.tile_values)));
            ASSERT_TRUE(dst[i] == 0.0f || std::fabs(dst[i]) == scale) << i;
          }
        }
        // Every ISA decodes the same bits.
        if (reference.empty() && expected != 0) {
          reference = dst;
        } else if (expected != 0) {
          ASSERT_EQ(std::memcmp(reference.data(), dst.data(), 4 * expected), 0)
              << "ISA " << isa_name(isa) << " decodes differently";
        }
      }
    }
    (any.ok() ? accepted : rejected)++;
  }
  // Both outcomes occur (the mutations are neither all fatal nor all harmless).
  EXPECT_GT(accepted, 20u);
  EXPECT_GT(rejected, 1000u);
}

}  // namespace
}  // namespace threelc::compression
