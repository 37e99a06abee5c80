// Known-answer tests of the 3LC block formats v1 (docs/DESIGN.md, "The 3LC codec"; bytes in
// docs/WIRE_FORMAT.md) and v2 (a scale per tile): every expected block below is derived by hand
// from the spec, never from the encoder's output.
//
// Construction used throughout: max |x + e| = 1.0 and s = 1.0, so scale = 1.0 (f32 bits
// 0x3F800000, little-endian bytes 00 00 80 3F) and h = 0.5. Then 0.75 and 1.0 quantize to +1
// (trit 2), -0.75 and -1.0 to -1 (trit 0), 0.25, 0.5, 0 and -0.5 to 0 (trit 1).
// A group byte is 81*t0 + 27*t1 + 9*t2 + 3*t3 + t4 with t = q + 1; all zero is 121; a group with
// only its first element +1 is 162 + 40 = 202, with only its first element -1 it is 40.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_support.h"
#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"

namespace threelc::compression {
namespace {

using test_support::bits_of;
using test_support::Bytes;
using test_support::float_of;
using test_support::put_u16;
using test_support::put_u32;
using test_support::put_u8;
using test_support::tiled_block;

// A 3LC block from its header fields, tile lengths and concatenated tile bytes.
Bytes threelc_block(uint32_t n, uint32_t scale_bits, const std::vector<Bytes>& tiles) {
  Bytes out;
  uint32_t payload = 0;
  for (const Bytes& t : tiles) payload += static_cast<uint32_t>(t.size());
  put_u8(out, 1);   // format: 3LC v1
  put_u8(out, 0);   // flags
  put_u16(out, 0);  // reserved
  put_u32(out, n);
  put_u32(out, scale_bits);
  put_u32(out, payload);
  for (const Bytes& t : tiles) put_u16(out, static_cast<uint16_t>(t.size()));
  for (const Bytes& t : tiles) out.insert(out.end(), t.begin(), t.end());
  return out;
}

Bytes repeat(uint8_t byte, size_t times) { return Bytes(times, byte); }

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::string isa_label(Isa isa) { return std::string(isa_name(isa)); }

// Encodes fp32 values with the given prior error (updated in place) on one ISA; scale_tile 0
// is format v1, otherwise v2 with a scale per tile of that many values.
Bytes encode_f32(const std::vector<float>& x, std::vector<float>* error, float sparsity, Isa isa,
                 EncodedBlock* result, size_t scale_tile = 0) {
  Bytes out(max_block_bytes(x.size()), 0xEE);
  const Status status = encode(Values{x.data(), DType::kFloat32, x.size()},
                               error != nullptr ? error->data() : nullptr,
                               EncodeOptions{sparsity, isa, scale_tile}, out, result);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_LE(result->bytes, out.size());
  out.resize(result->bytes);
  return out;
}

// Header fields read back by hand from the expected layout.
struct Fields {
  uint8_t format, flags;
  uint16_t reserved;
  uint32_t count, scale_bits, payload_bytes;
};
Fields fields_of(const Bytes& block) {
  EXPECT_GE(block.size(), 16u);
  Fields f{};
  f.format = block[0];
  f.flags = block[1];
  f.reserved = static_cast<uint16_t>(block[2] | block[3] << 8);
  auto u32 = [&](size_t at) {
    return static_cast<uint32_t>(block[at]) | static_cast<uint32_t>(block[at + 1]) << 8 |
           static_cast<uint32_t>(block[at + 2]) << 16 | static_cast<uint32_t>(block[at + 3]) << 24;
  };
  f.count = u32(4);
  f.scale_bits = u32(8);
  f.payload_bytes = u32(12);
  return f;
}

// Encodes x (with prior error e_old, scale_tile as in EncodeOptions) on every ISA this CPU runs
// and checks the block against `expected`, the error afterwards against `expected_error`, and
// the decoded values.
void check_known_answer(const std::vector<float>& x, const std::vector<float>& e_old,
                        float sparsity, const Bytes& expected,
                        const std::vector<float>& expected_error,
                        const std::vector<float>& expected_decoded, size_t scale_tile = 0) {
  ASSERT_EQ(x.size(), e_old.size());
  ASSERT_EQ(x.size(), expected_error.size());
  ASSERT_EQ(x.size(), expected_decoded.size());
  // One ISA per call, so that a failing ISA does not hide the results of the others.
  auto check_isa = [&](Isa isa) {
    std::vector<float> e = e_old;
    EncodedBlock result;
    const Bytes block = encode_f32(x, &e, sparsity, isa, &result, scale_tile);
    for (size_t i = 0; i < std::min(block.size(), expected.size()); ++i) {
      ASSERT_EQ(block[i], expected[i]) << "byte " << i << " of " << expected.size();
    }
    ASSERT_EQ(block.size(), expected.size());
    const Fields f = fields_of(expected);
    EXPECT_EQ(result.format, static_cast<Format>(f.format));
    EXPECT_EQ(bits_of(result.scale), f.scale_bits);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits_of(e[i]), bits_of(expected_error[i]))
          << "error[" << i << "] = " << e[i] << ", expected " << expected_error[i];
    }
    // Without an error buffer the block is the same when e_old is all zero.
    bool zero_error = true;
    for (float v : e_old) zero_error = zero_error && v == 0.0f;
    if (zero_error) {
      EncodedBlock no_error;
      EXPECT_EQ(encode_f32(x, nullptr, sparsity, isa, &no_error, scale_tile), expected);
    }

    BlockInfo info;
    const Status valid = validate(expected, x.size(), &info);
    ASSERT_TRUE(valid.ok()) << valid.message();
    EXPECT_EQ(info.count, x.size());
    EXPECT_EQ(bits_of(info.scale), f.scale_bits);
    EXPECT_EQ(info.payload_bytes, f.payload_bytes);
    EXPECT_EQ(info.tile_values, f.format == 2 ? size_t{5} * f.reserved : kTileValues);

    std::vector<float> decoded(x.size(), 12345.0f);
    const Status status = decode(expected, x.size(), decoded.data(), DecodeOptions{isa});
    ASSERT_TRUE(status.ok()) << status.message();
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits_of(decoded[i]), bits_of(expected_decoded[i])) << "decoded[" << i << "]";
    }
  };
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    check_isa(isa);
  }
}

// Scale 1.0: the bytes 00 00 80 3F.
constexpr uint32_t kOne = 0x3F800000u;

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

// Encodes the same values given as fp16 (`half`) and as bf16 (`brain`), with a zero prior
// error, on every ISA, and checks the block and the error afterwards.
void check_half_inputs(const std::vector<uint16_t>& half, const std::vector<uint16_t>& brain,
                       size_t scale_tile, const Bytes& expected,
                       const std::vector<float>& expected_error) {
  ASSERT_EQ(half.size(), brain.size());
  const size_t n = half.size();
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    for (const auto& [dtype, data] :
         {std::pair{DType::kFloat16, &half}, std::pair{DType::kBFloat16, &brain}}) {
      std::vector<float> e(n, 0.0f);
      Bytes out(max_block_bytes(n));
      EncodedBlock result;
      ASSERT_TRUE(encode(Values{data->data(), dtype, n}, e.data(),
                         EncodeOptions{1.0f, isa, scale_tile}, out, &result)
                      .ok());
      out.resize(result.bytes);
      EXPECT_EQ(out, expected);
      EXPECT_EQ(e, expected_error);
    }
  }
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

// --- format v2: a scale per tile -----------------------------------------------------------
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
}  // namespace threelc::compression
