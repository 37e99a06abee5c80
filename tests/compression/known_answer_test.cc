// Known-answer tests of the 3LC block format v1 (docs/DESIGN.md, "The 3LC codec"; bytes in
// docs/WIRE_FORMAT.md) and of raw blocks: every expected block below is derived by hand from the
// spec, never from the encoder's output (the construction: known_answer.h). Format v2:
// known_answer_tiled_test.cc.
#include <gtest/gtest.h>

#include "known_answer.h"

namespace threelc::compression::known_answer {
namespace {

TEST(KnownAnswer, EmptyBlock) {
  // n = 0: M over no values is 0, scale 0, no tiles, no payload: a bare 16-byte 3LC header.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00,   // format 1, flags 0, reserved 0
                          0x00, 0x00, 0x00, 0x00,   // n = 0
                          0x00, 0x00, 0x00, 0x00,   // scale 0.0
                          0x00, 0x00, 0x00, 0x00};  // payload 0
  check_known_answer({}, {}, 1.0f, expected, {}, {});
}

TEST(KnownAnswer, OneValue) {
  // g = 1; group 0 holds element 0 then four padding zeros: 81*2 + 27 + 9 + 3 + 1 = 202.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,  // 3LC, n = 1
                          0x00, 0x00, 0x80, 0x3F, 0x01, 0x00, 0x00, 0x00,  // scale 1, payload 1
                          0x01, 0x00,                                      // tile 0: 1 byte
                          202};
  check_known_answer({1.0f}, {0.0f}, 1.0f, expected, {0.0f}, {1.0f});
}

TEST(KnownAnswer, OneNegativeValueScaleHalf) {
  // x = -0.5: M = 0.5, scale 0.5 (0x3F000000), h = 0.25, q = -1: 0 + 27 + 9 + 3 + 1 = 40.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x00, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 40};
  check_known_answer({-0.5f}, {0.0f}, 1.0f, expected, {0.0f}, {-0.5f});
}

TEST(KnownAnswer, FourValues) {
  // q = +1, -1, 0, -1, pad 0 -> 81*2 + 27*0 + 9*1 + 3*0 + 1*1 = 172.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 172};
  check_known_answer({0.75f, -0.75f, 0.25f, -1.0f}, {0, 0, 0, 0}, 1.0f, expected,
                     {-0.25f, 0.25f, 0.25f, 0.0f}, {1.0f, -1.0f, 0.0f, -1.0f});
}

TEST(KnownAnswer, FiveValues) {
  // q = 0, +1, -1, +1, 0 -> 81*1 + 27*2 + 9*0 + 3*2 + 1*1 = 142.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 142};
  check_known_answer({0.25f, 0.75f, -0.75f, 1.0f, -0.25f}, {0, 0, 0, 0, 0}, 1.0f, expected,
                     {0.25f, -0.25f, 0.25f, 0.0f, -0.25f}, {0.0f, 1.0f, -1.0f, 1.0f, 0.0f});
}

TEST(KnownAnswer, FiveValuesThresholdIsStrict) {
  // |a| == h = 0.5 quantizes to 0: q = +1, 0, 0, 0, 0 -> 202.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 202};
  check_known_answer({1.0f, 0.5f, -0.5f, 0.0f, 0.125f}, {0, 0, 0, 0, 0}, 1.0f, expected,
                     {0.0f, 0.5f, -0.5f, 0.0f, 0.125f}, {1.0f, 0.0f, 0.0f, 0.0f, 0.0f});
}

TEST(KnownAnswer, FiveValuesWithPriorError) {
  // a = x + e = {0.75, -0.75, 0.25, 0.125, 1.0}: M = 1 comes from x + e, not x alone.
  // q = +1, -1, 0, 0, +1 -> 162 + 0 + 9 + 3 + 2 = 176.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 176};
  check_known_answer({0.5f, -0.5f, 0.0f, 0.125f, 0.5f}, {0.25f, -0.25f, 0.25f, 0.0f, 0.5f}, 1.0f,
                     expected, {-0.25f, 0.25f, 0.25f, 0.125f, 0.0f},
                     {1.0f, -1.0f, 0.0f, 0.0f, 1.0f});
}

TEST(KnownAnswer, SparsityOneAndAHalf) {
  // M = 1, s = 1.5: scale 1.5 (0x3FC00000), h = 0.75 (strict: 0.75 -> 0).
  // q = +1, 0, 0, -1, +1 -> 162 + 27 + 9 + 0 + 2 = 200; e = a - q * 1.5.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0xC0, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 200};
  check_known_answer({1.0f, 0.75f, -0.75f, -1.0f, 0.875f}, {0, 0, 0, 0, 0}, 1.5f, expected,
                     {-0.5f, 0.75f, -0.75f, 0.5f, -0.625f}, {1.5f, 0.0f, 0.0f, -1.5f, 1.5f});
}

TEST(KnownAnswer, SixValues) {
  // g = 2: group 0 = elements 0, 2, 4, (6), (8); group 1 = elements 1, 3, 5, (7), (9).
  // q = +1, -1, 0, +1, -1, 0.
  // group 0: +1, 0, -1, pad, pad -> 162 + 27 + 0 + 3 + 1 = 193
  // group 1: -1, +1, 0, pad, pad -> 0 + 54 + 9 + 3 + 1 = 67
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 193,  67};
  check_known_answer({1.0f, -1.0f, 0.25f, 0.75f, -0.75f, 0.0f}, std::vector<float>(6, 0.0f), 1.0f,
                     expected, {0.0f, 0.0f, 0.25f, -0.25f, 0.25f, 0.0f},
                     {1.0f, -1.0f, 0.0f, 1.0f, -1.0f, 0.0f});
}

TEST(KnownAnswer, SevenValues) {
  // g = 2: group 0 = elements 0, 2, 4, 6, (8); group 1 = elements 1, 3, 5, (7), (9).
  // q = +1, 0, -1, +1, 0, 0, -1.
  // group 0: +1, -1, 0, -1, pad -> 162 + 0 + 9 + 0 + 1 = 172
  // group 1: 0, +1, 0, pad, pad -> 81 + 54 + 9 + 3 + 1 = 148
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 172,  148};
  check_known_answer({0.75f, 0.25f, -0.75f, 1.0f, 0.25f, -0.25f, -1.0f},
                     std::vector<float>(7, 0.0f), 1.0f, expected,
                     {-0.25f, 0.25f, 0.25f, 0.0f, 0.25f, -0.25f, 0.0f},
                     {1.0f, 0.0f, -1.0f, 1.0f, 0.0f, 0.0f, -1.0f});
}

TEST(KnownAnswer, TenValuesSecondGroupZero) {
  // g = 2, group 1 all zero: a run of one group is the literal 121.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 202,  121};
  std::vector<float> x(10, 0.25f);
  x[0] = 1.0f;  // element 0 -> group 0, position 0
  std::vector<float> e_new(10, 0.25f);
  e_new[0] = 0.0f;
  std::vector<float> d(10, 0.0f);
  d[0] = 1.0f;
  check_known_answer(x, std::vector<float>(10, 0.0f), 1.0f, expected, e_new, d);
}

// Expected zero-run bytes for k zero groups, by hand from rule 7:
// floor(k/14) bytes 255, then r = k mod 14: nothing (0), 121 (1), 243 + (r - 2) (r >= 2).
struct RunCase {
  size_t k;
  Bytes bytes;
};
const std::vector<RunCase>& run_cases() {
  static const std::vector<RunCase> cases = {
      {1, {121}},
      {2, {243}},
      {3, {244}},
      {13, {254}},
      {14, {255}},
      {15, {255, 121}},
      {16, {255, 243}},
      {27, {255, 254}},
      {28, {255, 255}},
      {29, {255, 255, 121}},
      {30, {255, 255, 243}},
      {42, {255, 255, 255}},
  };
  return cases;
}

// One tile of g = k + 2 groups (n = 5g): group 0 = 202 (element 0 is +1), groups 1..k zero
// (their elements are 0.25, or 0), group k+1 = 40 (element k+1 is -1).
TEST(KnownAnswer, ZeroRunsBetweenLiterals) {
  for (const RunCase& c : run_cases()) {
    SCOPED_TRACE("run of " + std::to_string(c.k));
    const size_t g = c.k + 2;
    const size_t n = 5 * g;
    std::vector<float> x(n, 0.25f), e_new(n, 0.25f), d(n, 0.0f);
    x[0] = 1.0f, e_new[0] = 0.0f, d[0] = 1.0f;
    x[g - 1] = -1.0f, e_new[g - 1] = 0.0f, d[g - 1] = -1.0f;
    const Bytes expected =
        threelc_block(static_cast<uint32_t>(n), kOne, {concat({{202}, c.bytes, {40}})});
    check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
  }
}

// The run at the start of the tile (g = k + 1, the last group 40) and at its end (g = k + 1,
// group 0 = 202), so runs that touch the tile's edges are maximal too.
TEST(KnownAnswer, ZeroRunsAtTileEdges) {
  for (const RunCase& c : run_cases()) {
    SCOPED_TRACE("run of " + std::to_string(c.k));
    const size_t g = c.k + 1;
    const size_t n = 5 * g;
    {
      std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
      x[g - 1] = -1.0f, d[g - 1] = -1.0f;
      const Bytes expected =
          threelc_block(static_cast<uint32_t>(n), kOne, {concat({c.bytes, {40}})});
      check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
    }
    {
      std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
      x[0] = 1.0f, d[0] = 1.0f;
      const Bytes expected =
          threelc_block(static_cast<uint32_t>(n), kOne, {concat({{202}, c.bytes})});
      check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
    }
  }
}

// A run in a short last tile: n = 5 * 3 - 2 = 13, g = 3; group 0 literal, groups 1..2 zero,
// the padded tail included.
TEST(KnownAnswer, ZeroRunInPaddedTile) {
  std::vector<float> x(13, 0.0f), d(13, 0.0f);
  x[0] = -0.75f, d[0] = -1.0f;
  x[12] = 1.0f;  // element 12 = group 0, position 4: q4 = +1
  d[12] = 1.0f;
  std::vector<float> e_new(13, 0.0f);
  e_new[0] = 0.25f;
  // group 0: -1, 0, 0, 0, +1 -> 0 + 27 + 9 + 3 + 2 = 41; groups 1, 2 zero -> 243.
  const Bytes expected = threelc_block(13, kOne, {{41, 243}});
  check_known_answer(x, std::vector<float>(13, 0.0f), 1.0f, expected, e_new, d);
}

TEST(KnownAnswer, AllZeroTile) {
  // n = 20480 zeros: M = 0, scale 0, h = 0, every trit 0. 4096 zero groups = 292 * 14 + 8:
  // 292 bytes 255 then 243 + 6 = 249.
  const size_t n = kTileValues;
  const Bytes expected =
      threelc_block(static_cast<uint32_t>(n), 0u, {concat({repeat(255, 292), {249}})});
  check_known_answer(std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f), 1.0f, expected,
                     std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f));
}

TEST(KnownAnswer, ExactlyOneTile) {
  // n = 20480, g = 4096. x[0] = 1 -> group 0 = 202. x[20479] = -0.75 is element
  // 4095 + 4 * 4096: group 4095, position 4, q = -1 -> 81 + 27 + 9 + 3 + 0 = 120.
  // Groups 1..4094 are zero: 4094 = 292 * 14 + 6 -> 292 x 255, then 243 + 4 = 247.
  const size_t n = kTileValues;
  ASSERT_EQ(n, 20480u);
  std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
  x[0] = 1.0f, d[0] = 1.0f;
  x[20479] = -0.75f, d[20479] = -1.0f, e_new[20479] = 0.25f;
  const Bytes expected = threelc_block(static_cast<uint32_t>(n), kOne,
                                       {concat({{202}, repeat(255, 292), {247}, {120}})});
  ASSERT_EQ(expected.size(), 16u + 2u + 295u);
  check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
}

TEST(KnownAnswer, PartialLastTileRunEndsAtTileEdge) {
  // n = 20480 + 7: tile 0 has g = 4096, tile 1 has 7 values, g = 2.
  // Tile 0: x[0] = 1 -> 202, then 4095 zero groups = 292 * 14 + 7 -> 292 x 255, 243 + 5 = 248.
  // Tile 1 (elements 20480..20486): group 0 = elements 0, 2, 4, 6 (+1 at element 0) -> 202;
  // group 1 = elements 1, 3, 5 (-1 at element 1) -> 40.
  const size_t n = kTileValues + 7;
  std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
  x[0] = 1.0f, d[0] = 1.0f;
  x[20480] = 0.75f, d[20480] = 1.0f, e_new[20480] = -0.25f;
  x[20481] = -0.75f, d[20481] = -1.0f, e_new[20481] = 0.25f;
  const Bytes expected = threelc_block(static_cast<uint32_t>(n), kOne,
                                       {concat({{202}, repeat(255, 292), {248}}), {202, 40}});
  ASSERT_EQ(expected.size(), 16u + 4u + 294u + 2u);
  check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
}

TEST(KnownAnswer, RunDoesNotCrossTileBoundary) {
  // As above, but tile 1's group 0 is zero too: the zero run is cut at the tile edge.
  // Tile 0: 202, 292 x 255, 248 (4095 zero groups); tile 1: 121 (one zero group), 40.
  // An encoder that let the run cross would write 249 at the end of tile 0 and only 40 in tile 1.
  const size_t n = kTileValues + 7;
  std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
  x[0] = 1.0f, d[0] = 1.0f;
  x[20481] = -1.0f, d[20481] = -1.0f;
  const Bytes expected = threelc_block(static_cast<uint32_t>(n), kOne,
                                       {concat({{202}, repeat(255, 292), {248}}), {121, 40}});
  check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
}

TEST(KnownAnswer, RunOfFourteenEndsAtTileEdge) {
  // Tile 0: group 4081 is the last literal; groups 4082..4095 (14) are one 255 at the tile's
  // end. Groups 1..4080 (4080 = 291 * 14 + 6): 291 x 255, 247. Group 0 literal 202.
  // Element 4081 is group 4081, position 0: -1 -> 40.
  // Tile 1 (n = 20480 + 5, g = 1): element 20484 = position 4, +1 -> 81 + 27 + 9 + 3 + 2 = 122.
  const size_t n = kTileValues + 5;
  std::vector<float> x(n, 0.0f), e_new(n, 0.0f), d(n, 0.0f);
  x[0] = 1.0f, d[0] = 1.0f;
  x[4081] = -1.0f, d[4081] = -1.0f;
  x[20484] = 1.0f, d[20484] = 1.0f;
  const Bytes expected =
      threelc_block(static_cast<uint32_t>(n), kOne,
                    {concat({{202}, repeat(255, 291), {247}, {40}, {255}}), {122}});
  check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
}

TEST(KnownAnswer, ThreeTilesScaleFromLaterTile) {
  // n = 2 * 20480 + 1, all 0.25 except x[40960] = -2 (tile 2, its only value):
  // M = 2, scale 2 (0x40000000), h = 1: 0.25 -> 0 (e = 0.25), -2 -> -1 (e = 0).
  // Tiles 0 and 1 all zero (292 x 255, 249 each); tile 2: g = 1, -1 then padding -> 40.
  const size_t n = 2 * kTileValues + 1;
  std::vector<float> x(n, 0.25f), e_new(n, 0.25f), d(n, 0.0f);
  x[40960] = -2.0f, e_new[40960] = 0.0f, d[40960] = -2.0f;
  const Bytes zero_tile = concat({repeat(255, 292), {249}});
  const Bytes expected =
      threelc_block(static_cast<uint32_t>(n), 0x40000000u, {zero_tile, zero_tile, {40}});
  check_known_answer(x, std::vector<float>(n, 0.0f), 1.0f, expected, e_new, d);
}

TEST(KnownAnswer, Float16AndBFloat16Input) {
  // fp16: 1.0 = 0x3C00, -0.75 = 0xBA00, 0.25 = 0x3400, 0.75 = 0x3A00.
  // bf16: 1.0 = 0x3F80, -0.75 = 0xBF40, 0.25 = 0x3E80, 0.75 = 0x3F40.
  // Values {0.75, -0.75, 0.25, 1.0}: q = +1, -1, 0, +1, pad -> 162 + 0 + 9 + 6 + 1 = 178.
  const Bytes expected = {0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x80, 0x3F, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 178};
  check_half_inputs({0x3A00, 0xBA00, 0x3400, 0x3C00}, {0x3F40, 0xBF40, 0x3E80, 0x3F80}, 0, expected,
                    {-0.25f, 0.25f, 0.25f, 0.0f});
}

TEST(KnownAnswer, NonFiniteInputIsSentRaw) {
  // x = {1, NaN, 2}: raw block, header {0, 0, 0, n = 3, scale 0, payload 12}, then the fp32
  // values; the error buffer is left exactly as it was.
  const uint32_t nan_bits = 0x7FC01234u;  // a NaN with a payload, kept bit for bit
  const std::vector<float> x = {1.0f, float_of(nan_bits), 2.0f};
  const Bytes expected = {0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,  // raw, n = 3
                          0x00, 0x00, 0x00, 0x00, 0x0C, 0x00, 0x00, 0x00,  // scale 0, 12
                          0x00, 0x00, 0x80, 0x3F,                          // 1.0
                          0x34, 0x12, 0xC0, 0x7F,                          // NaN
                          0x00, 0x00, 0x00, 0x40};                         // 2.0
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    std::vector<float> e = {0.125f, -0.5f, 0.25f};
    EncodedBlock result;
    EXPECT_EQ(encode_f32(x, &e, 1.0f, isa, &result), expected);
    EXPECT_EQ(result.format, Format::kRaw);
    EXPECT_EQ(bits_of(result.scale), 0u);
    EXPECT_EQ(e, (std::vector<float>{0.125f, -0.5f, 0.25f}));
    std::vector<float> decoded(3);
    ASSERT_TRUE(decode(expected, 3, decoded.data(), DecodeOptions{isa}).ok());
    EXPECT_EQ(bits_of(decoded[0]), 0x3F800000u);
    EXPECT_EQ(bits_of(decoded[1]), nan_bits);
    EXPECT_EQ(bits_of(decoded[2]), 0x40000000u);
  }
}

TEST(KnownAnswer, InfiniteErrorSendsTheInputRaw) {
  // x finite, e = {0, +Inf}: a = x + e has an Inf, so the block is raw and carries x (not a).
  const std::vector<float> x = {-1.0f, 0.5f};
  const Bytes expected = {0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0xBF,  // -1.0
                          0x00, 0x00, 0x00, 0x3F};                                     // 0.5
  std::vector<float> e = {0.0f, std::numeric_limits<float>::infinity()};
  EncodedBlock result;
  EXPECT_EQ(encode_f32(x, &e, 1.0f, Isa::kAuto, &result), expected);
  EXPECT_EQ(e[1], std::numeric_limits<float>::infinity());
}

TEST(KnownAnswer, OverflowingScaleIsSentRaw) {
  // M = FLT_MAX (0x7F7FFFFF), s = 1.5: M * s overflows to Inf -> raw.
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> x = {big, 0.0f};
  const Bytes expected = {0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x08, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0x7F, 0x7F, 0x00, 0x00, 0x00, 0x00};
  std::vector<float> e = {0.0f, 0.0f};
  EncodedBlock result;
  EXPECT_EQ(encode_f32(x, &e, 1.5f, Isa::kAuto, &result), expected);
  // With s = 1 the same values fit: scale FLT_MAX, q = +1, 0 -> 162 + 27 + 9 + 3 + 1 = 202.
  const Bytes fits = threelc_block(2, 0x7F7FFFFFu, {{202}});
  EXPECT_EQ(encode_f32(x, &e, 1.0f, Isa::kAuto, &result), fits);
}

TEST(KnownAnswer, EncodeRawWidensExactly) {
  // fp16 {1.0, -2.0, smallest subnormal 2^-24, +Inf} -> fp32 {0x3F800000, 0xC0000000,
  // 0x33800000, 0x7F800000}.
  const std::vector<uint16_t> half = {0x3C00, 0xC000, 0x0001, 0x7C00};
  const Bytes expected = {0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00,
                          0x00, 0xC0, 0x00, 0x00, 0x80, 0x33, 0x00, 0x00, 0x80, 0x7F};
  Bytes out(raw_block_bytes(4));
  EncodedBlock result;
  ASSERT_TRUE(encode_raw(Values{half.data(), DType::kFloat16, 4}, out, &result).ok());
  EXPECT_EQ(result.bytes, 32u);
  EXPECT_EQ(result.format, Format::kRaw);
  EXPECT_EQ(out, expected);
  // bf16 {1.0, -0.75} -> {0x3F800000, 0xBF400000}.
  const std::vector<uint16_t> brain = {0x3F80, 0xBF40};
  const Bytes expected_bf16 = {0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00,
                               0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
                               0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x40, 0xBF};
  Bytes out_bf16(raw_block_bytes(2));
  ASSERT_TRUE(encode_raw(Values{brain.data(), DType::kBFloat16, 2}, out_bf16, &result).ok());
  EXPECT_EQ(out_bf16, expected_bf16);
  // n = 0: a bare raw header.
  Bytes empty(raw_block_bytes(0));
  ASSERT_TRUE(encode_raw(Values{nullptr, DType::kFloat32, 0}, empty, &result).ok());
  EXPECT_EQ(empty, Bytes(16, 0x00));
}

}  // namespace
}  // namespace threelc::compression::known_answer
