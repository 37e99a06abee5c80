// What the malformed-block tests share: byte access to a block's fields, valid base blocks to
// damage (encoded, raw, written by hand in formats v1 and v2), and the check that a block is
// refused by validate, decode, decode_add (every ISA) and the C ABI, destination untouched.
#pragma once

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

namespace threelc::compression::malformed_blocks {

using test_support::Bytes;
using test_support::tiled_block;

inline void set_u16(Bytes& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v & 0xFF);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}
inline void set_u32(Bytes& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>((v >> (8 * i)) & 0xFF);
}
inline uint16_t get_u16(const Bytes& b, size_t at) {
  return static_cast<uint16_t>(b[at] | static_cast<unsigned>(b[at + 1]) << 8);
}
inline uint32_t get_u32(const Bytes& b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}

// Header field offsets (docs/WIRE_FORMAT.md, "Layout": format u8, flags u8, reserved u16,
// n u32, scale f32, payload_bytes u32), then the u16 tile table.
inline constexpr size_t kFormatAt = 0, kFlagsAt = 1, kReservedAt = 2, kCountAt = 4, kScaleAt = 8,
                        kPayloadAt = 12, kTableAt = 16;

// scale_tile 0 writes format v1, otherwise v2 (when there is more than one tile).
inline Bytes encode_block(const std::vector<float>& x, size_t scale_tile = 0) {
  Bytes out(max_block_bytes(x.size()));
  EncodedBlock result;
  const Status status = encode(Values{x.data(), DType::kFloat32, x.size()}, nullptr,
                               EncodeOptions{1.0f, Isa::kAuto, scale_tile}, out, &result);
  EXPECT_TRUE(status.ok()) << status.message();
  out.resize(result.bytes);
  return out;
}

inline Bytes raw_block(const std::vector<float>& x) {
  Bytes out(raw_block_bytes(x.size()));
  EncodedBlock result;
  EXPECT_TRUE(encode_raw(Values{x.data(), DType::kFloat32, x.size()}, out, &result).ok());
  return out;
}

// n = 20480 + 7, two tiles. Tile 0: group 0 = 202, 4095 zero groups (292 x 255, then 248);
// tile 1: {121, 40}. Written by hand (see known_answer_test.cc).
inline Bytes two_tile_block() {
  Bytes b = {0x01, 0x00, 0x00, 0x00};
  b.resize(16);
  set_u32(b, kCountAt, kTileValues + 7);
  set_u32(b, kScaleAt, 0x3F800000u);
  set_u32(b, kPayloadAt, 294 + 2);
  b.resize(20);
  set_u16(b, kTableAt, 294);
  set_u16(b, kTableAt + 2, 2);
  Bytes tile0(294, 255);  // 202, 292 x 255, 248
  tile0.front() = 202;
  tile0.back() = 248;
  b.insert(b.end(), tile0.begin(), tile0.end());
  b.push_back(121);
  b.push_back(40);
  return b;
}

inline constexpr size_t kTwoTileCount = kTileValues + 7;

// Format v2, n = 12, G = 1 (tiles of 5 values): tile 0 {174} with scale 1, tile 1 {121} (all
// zero) with scale 0, tile 2 {40} with scale 0.25; the header's scale is the largest, 1.
// Written by hand (see known_answer_test.cc). Lengths at 16, 18, 20; scales at 22, 26, 30;
// the tiles at 34, 35, 36.
inline Bytes three_tile_block() {
  return tiled_block(12, 1, 0x3F800000u,
                     {{0x3F800000u, {174}}, {0x00000000u, {121}}, {0x3E800000u, {40}}});
}
inline constexpr size_t kThreeTileCount = 12;
inline constexpr size_t kScalesAt = kTableAt + 6;  // three_tile_block's scale table: 3 lengths on

// A float pattern that no successful decode of these blocks would produce by accident.
inline constexpr float kSentinel = -12345.678f;

// Checks that `block` is refused with a message containing `needle` by validate, decode and
// decode_add (every ISA) and the C ABI, with the destination untouched.
inline void expect_rejected(const Bytes& block, size_t expected_count, const std::string& needle) {
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

inline void expect_valid(const Bytes& block, size_t expected_count) {
  const Status status = validate(block, expected_count, nullptr);
  ASSERT_TRUE(status.ok()) << status.message();
}

}  // namespace threelc::compression::malformed_blocks
