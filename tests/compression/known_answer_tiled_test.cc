// Known-answer tests of the 3LC block format v2 (a scale per tile): every expected block below
// is derived by hand from the spec, never from the encoder's output (the construction:
// known_answer.h).
#include <gtest/gtest.h>

#include "known_answer.h"

namespace threelc::compression::known_answer {
namespace {

// Tiles of scale_tile = 5G values (G in the header's reserved field), each quantized with its
// own scale_t = max |a| over the tile * s, h_t = 0.5 * scale_t, and packed and zero-run encoded
// exactly as a v1 tile of g groups. After the header: the u16 length table, then the f32
// scale table, then the tiles. The header's scale is the largest tile scale.

TEST(KnownAnswer, TiledThreeTilesOneAllZero) {
  // n = 12, scale_tile 5 (G = 1): tiles {0..4}, {5..9}, {10, 11}; each tile is one group.
  // Tile 0: {1, -0.75, 0.25, 0.5, -1}: M = 1, scale 1, h = 0.5 (strict: 0.5 -> 0);
  //   q = +1, -1, 0, 0, -1 -> 162 + 0 + 9 + 3 + 0 = 174.
  // Tile 1: all zero: M = 0, scale 0, the zero group 121.
  // Tile 2: {-0.25, 0.125}: M = 0.25, scale 0.25 (0x3E800000), h = 0.125;
  //   q = -1, 0, pad, pad, pad -> 0 + 27 + 9 + 3 + 1 = 40.
  // (With one scale for the block, v1, tile 2 would quantize to zeros.)
  const std::vector<float> x = {1.0f, -0.75f, 0.25f, 0.5f, -1.0f,  0.0f,
                                0.0f, 0.0f,   0.0f,  0.0f, -0.25f, 0.125f};
  const Bytes expected = {0x02, 0x00, 0x01, 0x00,              // format 2, flags 0, G = 1
                          0x0C, 0x00, 0x00, 0x00,              // n = 12
                          0x00, 0x00, 0x80, 0x3F,              // scale: the largest tile scale, 1.0
                          0x03, 0x00, 0x00, 0x00,              // payload 3
                          0x01, 0x00, 0x01, 0x00, 0x01, 0x00,  // tile lengths 1, 1, 1
                          0x00, 0x00, 0x80, 0x3F,              // tile 0 scale 1.0
                          0x00, 0x00, 0x00, 0x00,              // tile 1 scale 0.0
                          0x00, 0x00, 0x80, 0x3E,              // tile 2 scale 0.25
                          174,  121,  40};
  ASSERT_EQ(expected.size(), 16u + 6u * 3u + 3u);
  const std::vector<float> e_new = {0.0f, 0.25f, 0.25f, 0.5f, 0.0f, 0.0f,
                                    0.0f, 0.0f,  0.0f,  0.0f, 0.0f, 0.125f};
  const std::vector<float> d = {1.0f, -1.0f, 0.0f, 0.0f, -1.0f,  0.0f,
                                0.0f, 0.0f,  0.0f, 0.0f, -0.25f, 0.0f};
  check_known_answer(x, std::vector<float>(12, 0.0f), 1.0f, expected, e_new, d, 5);

  // decode_add with alpha 0.5 adds q * (0.5 * scale_t): 0.5 in tile 0, 0.125 in tile 2; zero
  // trits (the whole of tile 1) leave the destination as it was, -0.0 included.
  const std::vector<float> dst0 = {2.0f, 2.0f, -0.0f, 2.0f, 2.0f, -0.0f,
                                   3.0f, 3.0f, 3.0f,  3.0f, 2.0f, -0.0f};
  const std::vector<float> want = {2.5f, 1.5f, -0.0f, 2.0f, 1.5f,   -0.0f,
                                   3.0f, 3.0f, 3.0f,  3.0f, 1.875f, -0.0f};
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    std::vector<float> dst = dst0;
    ASSERT_TRUE(decode_add(expected, 12, 0.5f, dst.data(), DecodeOptions{isa}).ok());
    for (size_t i = 0; i < dst.size(); ++i) {
      EXPECT_EQ(bits_of(dst[i]), bits_of(want[i])) << "dst[" << i << "] = " << dst[i];
    }
  }
}

TEST(KnownAnswer, TiledTwoGroupsPerTileWithPriorErrorAndSparsity) {
  // n = 13, scale_tile 10 (G = 2), s = 1.5. a = x + e_old =
  //   {2, -1.75, 1.5, 0, -2, 0.5, 1, -1.5, 1.75, 0 | 0.25, -0.125, 0.0625}
  // (tile 0's max |a| = 2 comes from x + e, |x| alone is at most 1.75).
  // Tile 0: scale 2 * 1.5 = 3 (0x40400000), h = 1.5 (strict); g = 2:
  //   group 0 = elements 0, 2, 4, 6, 8: q = +1, 0, -1, 0, +1 -> 162 + 27 + 0 + 3 + 2 = 194
  //   group 1 = elements 1, 3, 5, 7, 9: q = -1, 0, 0, 0, 0 -> 0 + 27 + 9 + 3 + 1 = 40.
  // Tile 1: scale 0.25 * 1.5 = 0.375 (0x3EC00000), h = 0.1875; g = 1, elements 10, 11, 12:
  //   q = +1, 0, 0, pad, pad -> 162 + 27 + 9 + 3 + 1 = 202.
  // e_new = a - q * scale_t.
  const std::vector<float> x = {1.5f,  -1.5f, 1.5f, 0.0f,   -1.0f,   0.5f,   1.0f,
                                -1.5f, 1.75f, 0.0f, 0.125f, -0.125f, 0.0625f};
  std::vector<float> e_old(13, 0.0f);
  e_old[0] = 0.5f, e_old[1] = -0.25f, e_old[4] = -1.0f, e_old[10] = 0.125f;
  const Bytes expected =
      tiled_block(13, 2, 0x40400000u, {{0x40400000u, {194, 40}}, {0x3EC00000u, {202}}});
  ASSERT_EQ(expected.size(), 16u + 6u * 2u + 3u);
  const std::vector<float> e_new = {-1.0f, 1.25f,  1.5f, 0.0f,    1.0f,    0.5f,   1.0f,
                                    -1.5f, -1.25f, 0.0f, -0.125f, -0.125f, 0.0625f};
  const std::vector<float> d = {3.0f, -3.0f, 0.0f, 0.0f,   -3.0f, 0.0f, 0.0f,
                                0.0f, 3.0f,  0.0f, 0.375f, 0.0f,  0.0f};
  check_known_answer(x, e_old, 1.5f, expected, e_new, d, 10);
}

TEST(KnownAnswer, TiledFullSizeTiles) {
  // n = 20480 + 7, scale_tile 20480 (G = 4096, reserved 0x1000): the tiles of v1 with a scale
  // each. Tile 0: x[0] = 1 -> 202, 4095 zero groups -> 292 x 255, 248; scale 1.
  // Tile 1: {0.75, -0.75, 0, 0, 0, 0, 0}: scale 0.75 (0x3F400000), h = 0.375; group 0 =
  // elements 0, 2, 4, 6 (+1) -> 202, group 1 = elements 1, 3, 5 (-1) -> 40; e = 0, decoded
  // exactly (v1's one scale decodes them to +-1 with errors -+0.25).
  const size_t n = kTileValues + 7;
  std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
  x[0] = 1.0f, d[0] = 1.0f;
  x[20480] = 0.75f, d[20480] = 0.75f;
  x[20481] = -0.75f, d[20481] = -0.75f;
  const Bytes expected =
      tiled_block(static_cast<uint32_t>(n), 4096, kOne,
                  {{kOne, concat({{202}, repeat(255, 292), {248}})}, {0x3F400000u, {202, 40}}});
  ASSERT_EQ(expected.size(), 16u + 12u + 294u + 2u);
  check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d, kTileValues);
}

TEST(KnownAnswer, TiledZeroRunsStopAtEachTileEdge) {
  // n = 151, scale_tile 75 (G = 15): tiles {0..74}, {75..149}, {150}.
  // Tile 0: x[0] = 1 -> group 0 = 202, then 14 zero groups -> 255; scale 1.
  // Tile 1: all zero, 15 zero groups -> 255, 121; scale 0.
  // Tile 2: {-0.5}: scale 0.5 (0x3F000000), -1 -> 40.
  // A run that crossed the tile edges would be 29 groups: 255, 255, 121.
  std::vector<float> x(151, 0.0f), d(151, 0.0f);
  x[0] = 1.0f, d[0] = 1.0f;
  x[150] = -0.5f, d[150] = -0.5f;
  const Bytes expected =
      tiled_block(151, 15, kOne, {{kOne, {202, 255}}, {0u, {255, 121}}, {0x3F000000u, {40}}});
  check_known_answer(x, std::vector<float>(151, 0.0f), 1.0f, expected,
                     std::vector<float>(151, 0.0f), d, 75);
}

TEST(KnownAnswer, TiledBlockOfOneTileIsWrittenAsV1) {
  // At most scale_tile values make one tile, quantized the same with one scale: the encoder
  // writes format v1, 4 bytes shorter than v2 (16 + 2 + payload).
  for (size_t scale_tile : {size_t{5}, size_t{1280}, kTileValues}) {
    SCOPED_TRACE("scale_tile " + std::to_string(scale_tile));
    check_known_answer({}, {}, 1.0f, threelc_block(0, 0u, {}), {}, {}, scale_tile);
    // As FourValues: q = +1, -1, 0, -1, pad -> 172.
    check_known_answer({0.75f, -0.75f, 0.25f, -1.0f}, {0, 0, 0, 0}, 1.0f,
                       threelc_block(4, kOne, {{172}}), {-0.25f, 0.25f, 0.25f, 0.0f},
                       {1.0f, -1.0f, 0.0f, -1.0f}, scale_tile);
    // As FiveValues (exactly one tile of 5): q = 0, +1, -1, +1, 0 -> 142.
    check_known_answer({0.25f, 0.75f, -0.75f, 1.0f, -0.25f}, {0, 0, 0, 0, 0}, 1.0f,
                       threelc_block(5, kOne, {{142}}), {0.25f, -0.25f, 0.25f, 0.0f, -0.25f},
                       {0.0f, 1.0f, -1.0f, 1.0f, 0.0f}, scale_tile);
  }
}

TEST(KnownAnswer, TiledFloat16AndBFloat16Input) {
  // {0.75, -0.75, 0.25, 1.0, 0.0 | -0.25}, scale_tile 5: tile 0 scale 1, q = +1, -1, 0, +1, 0
  // -> 162 + 0 + 9 + 6 + 1 = 178; tile 1 scale 0.25 (0x3E800000), q = -1 -> 40.
  // fp16: -0.25 = 0xB400; bf16: -0.25 = 0xBE80 (the others as in Float16AndBFloat16Input).
  const Bytes expected = tiled_block(6, 1, kOne, {{kOne, {178}}, {0x3E800000u, {40}}});
  check_half_inputs({0x3A00, 0xBA00, 0x3400, 0x3C00, 0x0000, 0xB400},
                    {0x3F40, 0xBF40, 0x3E80, 0x3F80, 0x0000, 0xBE80}, 5, expected,
                    {-0.25f, 0.25f, 0.25f, 0.0f, 0.0f, 0.0f});
}

// A raw block of fp32 values, by hand: header {0, 0, 0, n, scale 0, 4n}, then the values.
Bytes raw_of(const std::vector<float>& x) {
  Bytes out;
  put_u8(out, 0);
  put_u8(out, 0);
  put_u16(out, 0);
  put_u32(out, static_cast<uint32_t>(x.size()));
  put_u32(out, 0);
  put_u32(out, static_cast<uint32_t>(4 * x.size()));
  for (float v : x) put_u32(out, bits_of(v));
  return out;
}

TEST(KnownAnswer, TiledNonFiniteInputAndScaleOverflowAreSentRaw) {
  // A NaN in tile 1 of a v2 block (after tile 0's scale was written): the block is raw, the
  // error untouched, the NaN's payload kept.
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, float_of(0x7FC01234u), -1.0f};
  const std::vector<float> e_old = {0.125f, -0.5f, 0.25f, 0.0f, 1.0f, 2.0f, -0.0f};
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    std::vector<float> e = e_old;
    EncodedBlock result;
    EXPECT_EQ(encode_f32(x, &e, 1.0f, isa, &result, 5), raw_of(x));
    EXPECT_EQ(result.format, Format::kRaw);
    for (size_t i = 0; i < e.size(); ++i) EXPECT_EQ(bits_of(e[i]), bits_of(e_old[i])) << i;
  }
  // Tile 1's scale FLT_MAX * 1.5 overflows: raw. With s = 1 it fits: tile 0 {1, 0, 0, 0, 0}
  // -> 202 (scale 1); tile 1 {FLT_MAX, 0} -> 202 (scale 0x7F7FFFFF, also the header's).
  const std::vector<float> big = {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, std::numeric_limits<float>::max(),
                                  0.0f};
  std::vector<float> e(7, 0.0f);
  EncodedBlock result;
  EXPECT_EQ(encode_f32(big, &e, 1.5f, Isa::kAuto, &result, 5), raw_of(big));
  EXPECT_EQ(e, std::vector<float>(7, 0.0f));
  EXPECT_EQ(encode_f32(big, &e, 1.0f, Isa::kAuto, &result, 5),
            tiled_block(7, 1, 0x7F7FFFFFu, {{kOne, {202}}, {0x7F7FFFFFu, {202}}}));
}

}  // namespace
}  // namespace threelc::compression::known_answer
