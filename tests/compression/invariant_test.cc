// Property tests of the codec on random inputs: the error-feedback identity, decode of the
// quantized values, decode_add, raw blocks, fp16/bf16 widening, argument checks and the C ABI,
// for format v1 (one scale per block) and v2 (a scale per tile of scale_tile values).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_support.h"
#include "threelc/codec.h"
#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"

namespace threelc::compression {
namespace {

using test_support::bits_of;
using test_support::Bytes;
using test_support::float_of;

// Independent fp16 -> fp32 (exact): the value (-1)^s * m * 2^(e - 25) built in double.
float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u;
  const int exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign << 31 | 0x7F800000u | mantissa << 13);
  const double magnitude = exponent == 0
                               ? std::ldexp(static_cast<double>(mantissa), -24)
                               : std::ldexp(static_cast<double>(mantissa + 1024u), exponent - 25);
  return static_cast<float>(sign != 0 ? -magnitude : magnitude);
}

std::string isa_label(Isa isa) { return std::string(isa_name(isa)); }

// Random test vectors of several shapes: dense normal, wide dynamic range, sparse, constant.
std::vector<float> random_values(std::mt19937& rng, size_t n, int kind) {
  std::vector<float> v(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    switch (kind % 5) {
      case 0:
        v[i] = normal(rng);
        break;
      case 1:
        v[i] = std::ldexp(normal(rng), exponent(rng));
        break;
      case 2:  // mostly zero, long zero runs
        v[i] = unit(rng) < 0.02f ? normal(rng) : 0.0f;
        break;
      case 3:  // mostly tiny, a few large: most trits zero
        v[i] = unit(rng) < 0.001f ? 100.0f * normal(rng) : 1e-3f * normal(rng);
        break;
      default:  // signed zeros and exact ties at h
        v[i] = std::array<float, 6>{0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.0f}[rng() % 6];
        break;
    }
  }
  return v;
}

size_t random_size(std::mt19937& rng) {
  static const size_t sizes[] = {0,         1,     2,     4,     5,     6,     7,
                                 13,        64,    1000,  4096,  20479, 20480, 20481,
                                 20480 + 7, 40960, 45000, 61441, 100003};
  return sizes[rng() % (sizeof sizes / sizeof sizes[0])];
}

struct Quantized {
  float scale = 0.0f;              // the largest tile scale (v1: the one scale)
  std::vector<float> tile_scales;  // max |a| over each tile * s
  std::vector<float> decoded;      // q * scale of the value's tile
  std::vector<float> error;        // a - q * scale of the value's tile
};

// The spec's steps 1-4, written independently of the codec (fp32 throughout), with one scale
// per tile of `scale_tile` values (0: one scale for the block, format v1).
Quantized reference_quantize(const std::vector<float>& x, const std::vector<float>& e,
                             float sparsity, size_t scale_tile = 0) {
  Quantized r;
  const size_t n = x.size();
  const size_t per_tile = scale_tile == 0 ? std::max<size_t>(n, 1) : scale_tile;
  r.decoded.resize(n);
  r.error.resize(n);
  for (size_t begin = 0; begin < n; begin += per_tile) {
    const size_t end = std::min(n, begin + per_tile);
    float m = 0.0f;
    for (size_t i = begin; i < end; ++i) m = std::max(m, std::fabs(x[i] + e[i]));
    const float scale = m * sparsity;
    const float h = 0.5f * scale;
    r.tile_scales.push_back(scale);
    r.scale = std::max(r.scale, scale);
    for (size_t i = begin; i < end; ++i) {
      const float a = x[i] + e[i];
      const float q = a > h ? 1.0f : (a < -h ? -1.0f : 0.0f);
      r.decoded[i] = q * scale;
      if (q == 0.0f) r.decoded[i] = 0.0f;  // decoded zeros are +0.0
      r.error[i] = a - r.decoded[i];
    }
  }
  return r;
}

Bytes encode_or_die(const Values& values, float* error, float sparsity, Isa isa,
                    EncodedBlock* result, size_t scale_tile = 0) {
  Bytes out(max_block_bytes(values.count));
  const Status status =
      encode(values, error, EncodeOptions{sparsity, isa, scale_tile}, out, result);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_LE(result->bytes, out.size());
  out.resize(std::min(result->bytes, out.size()));
  return out;
}

uint32_t le_u32(const Bytes& b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}

// Whether encoding n values with this scale_tile writes format v2: a scale per tile, when
// there is more than one tile (a block of one tile is quantized the same and written as v1).
bool writes_v2(size_t n, size_t scale_tile) { return scale_tile != 0 && n > scale_tile; }

// Encodes x with the prior error e_old on every ISA (scalar first) and checks against the
// reference: the header, the block's size from its tile tables, each tile's scale (v2: the
// scale table), the error afterwards, the decoded values (each tile's largest magnitude is its
// max |a| * s), d + e_new == x + e_old, and that every ISA writes the scalar block.
void check_error_feedback(const std::vector<float>& x, const std::vector<float>& e_old,
                          float sparsity, size_t scale_tile) {
  const size_t n = x.size();
  const Quantized expected = reference_quantize(x, e_old, sparsity, scale_tile);
  const bool v2 = writes_v2(n, scale_tile);
  const size_t per_tile = v2 ? scale_tile : kTileValues;
  const size_t tiles = tile_count(n, per_tile);
  Bytes scalar_block;
  // One ISA per call, so that a failing ISA does not hide the results of the others.
  auto check_isa = [&](Isa isa) {
    std::vector<float> e = e_old;
    EncodedBlock result;
    const Bytes block = encode_or_die(Values{x.data(), DType::kFloat32, n}, e.data(), sparsity, isa,
                                      &result, scale_tile);
    ASSERT_EQ(result.format, v2 ? Format::kThreeLCTiled : Format::kThreeLC);
    ASSERT_EQ(bits_of(result.scale), bits_of(expected.scale));
    ASSERT_GE(block.size(), kHeaderBytes);
    // Header: format, flags, reserved (v2: G = scale_tile / 5), n, scale, payload bytes; then
    // 2 (v1) or 2 + 4 (v2) table bytes per tile and the payload, nothing else.
    EXPECT_EQ(block[0], v2 ? 2 : 1);
    EXPECT_EQ(block[1], 0);
    EXPECT_EQ(block[2] | block[3] << 8, v2 ? static_cast<int>(scale_tile / 5) : 0);
    EXPECT_EQ(le_u32(block, 4), n);
    EXPECT_EQ(le_u32(block, 8), bits_of(expected.scale));
    const size_t payload = le_u32(block, 12);
    ASSERT_EQ(block.size(), kHeaderBytes + (v2 ? 6 : 2) * tiles + payload);
    ASSERT_LE(payload, (n + 4) / 5 + tiles);  // at most the groups, padding included
    ASSERT_LE(block.size(), max_block_bytes(n));
    ASSERT_EQ(expected.tile_scales.size(), v2 ? tiles : std::min<size_t>(tiles, 1));
    if (v2) {
      for (size_t t = 0; t < tiles; ++t) {
        ASSERT_EQ(le_u32(block, kHeaderBytes + 2 * tiles + 4 * t), bits_of(expected.tile_scales[t]))
            << "scale of tile " << t;
      }
    }
    if (isa == Isa::kScalar) {
      scalar_block = block;
    } else {
      ASSERT_EQ(block, scalar_block) << "block differs from the scalar reference's";
    }

    std::vector<float> d(n, 777.0f);
    const Status status = decode(block, n, d.data(), DecodeOptions{isa});
    ASSERT_TRUE(status.ok()) << status.message();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits_of(d[i]), bits_of(expected.decoded[i]))
          << "decoded[" << i << "] = " << d[i] << ", expected " << expected.decoded[i];
      ASSERT_EQ(bits_of(e[i]), bits_of(expected.error[i])) << "error[" << i << "]";
      // d + e_new == x + e_old bit for bit. The one exception is a = -0.0: it quantizes to
      // 0, d = +0.0, e_new = -0.0 and d + e_new = +0.0 (equal as numbers, not as bits).
      const float a = x[i] + e_old[i];
      const float sum = d[i] + e[i];
      if (a == 0.0f) {
        ASSERT_EQ(sum, 0.0f) << "i " << i;
      } else {
        ASSERT_EQ(bits_of(sum), bits_of(a))
            << "i " << i << ": " << d[i] << " + " << e[i] << " != " << x[i] << " + " << e_old[i];
      }
    }
    // Each tile's largest decoded magnitude is its own max |a| * s (s < 2, so the largest |a|
    // is always past h); all-zero tiles decode to zeros.
    const size_t scale_per = scale_tile == 0 ? std::max<size_t>(n, 1) : scale_tile;
    for (size_t begin = 0, t = 0; begin < n; begin += scale_per, ++t) {
      float m = 0.0f, top = 0.0f;
      for (size_t i = begin; i < std::min(n, begin + scale_per); ++i) {
        m = std::max(m, std::fabs(x[i] + e_old[i]));
        top = std::max(top, std::fabs(d[i]));
      }
      ASSERT_EQ(bits_of(top), bits_of(m * sparsity)) << "tile " << t << " of " << scale_per;
    }
  };
  for (Isa isa : supported_isas()) {  // scalar first
    SCOPED_TRACE("n " + std::to_string(n) + " scale_tile " + std::to_string(scale_tile) + " s " +
                 std::to_string(sparsity) + " isa " + isa_label(isa));
    check_isa(isa);
  }
  bool zero_error = true;
  for (float v : e_old) zero_error = zero_error && v == 0.0f;
  EncodedBlock result;
  if (zero_error) {  // no error buffer is a zero error
    EXPECT_EQ(encode_or_die(Values{x.data(), DType::kFloat32, n}, nullptr, sparsity, Isa::kAuto,
                            &result, scale_tile),
              scalar_block);
  }
  if (scale_tile != 0 && !v2) {  // one tile: the v1 block, byte for byte
    std::vector<float> e = e_old;
    EXPECT_EQ(encode_or_die(Values{x.data(), DType::kFloat32, n}, e.data(), sparsity, Isa::kAuto,
                            &result),
              scalar_block);
  }
}

// The sizes and scale tiles of the v2 tests: empty, shorter than a tile, exactly one tile,
// one value past a tile edge, many tiles.
const size_t kTiledSizes[] = {0, 1, 4, 5, 6, 1279, 1280, 1281, 20481, 100003};
const size_t kScaleTiles[] = {5, 1280, 20480};

TEST(Invariant, ErrorFeedbackIdentityAndDecode) {
  std::mt19937 rng(20240601);
  for (int round = 0; round < 60; ++round) {
    const size_t n = random_size(rng);
    const std::vector<float> x = random_values(rng, n, round);
    std::vector<float> e_old = random_values(rng, n, round / 5 + 1);
    if (round % 3 == 0) std::fill(e_old.begin(), e_old.end(), 0.0f);
    const float sparsity = std::array<float, 4>{1.0f, 1.25f, 1.5f, 1.9999999f}[round % 4];
    SCOPED_TRACE("round " + std::to_string(round));
    check_error_feedback(x, e_old, sparsity, 0);
  }
}

TEST(Invariant, TiledErrorFeedbackIdentityAndDecode) {
  std::mt19937 rng(20240602);
  int round = 0;
  for (size_t scale_tile : kScaleTiles) {
    for (size_t n : kTiledSizes) {
      // Two value shapes per size (of the five), the error zero every third time.
      for (int shape = 0; shape < 2; ++shape, ++round) {
        const std::vector<float> x = random_values(rng, n, round);
        std::vector<float> e_old = random_values(rng, n, round / 5 + 1);
        if (round % 3 == 0) std::fill(e_old.begin(), e_old.end(), 0.0f);
        const float sparsity = std::array<float, 4>{1.0f, 1.25f, 1.5f, 1.9999999f}[round % 4];
        SCOPED_TRACE("round " + std::to_string(round));
        check_error_feedback(x, e_old, sparsity, scale_tile);
      }
    }
  }
}

TEST(Invariant, NullErrorBufferMeansZeroError) {
  std::mt19937 rng(7);
  for (int round = 0; round < 10; ++round) {
    const size_t n = random_size(rng);
    const std::vector<float> x = random_values(rng, n, round);
    std::vector<float> zeros(n, 0.0f);
    EncodedBlock with, without;
    const Bytes a =
        encode_or_die(Values{x.data(), DType::kFloat32, n}, zeros.data(), 1.0f, Isa::kAuto, &with);
    const Bytes b =
        encode_or_die(Values{x.data(), DType::kFloat32, n}, nullptr, 1.0f, Isa::kAuto, &without);
    EXPECT_EQ(a, b);
  }
}

// Encodes random values (shape `round`) and checks decode_add against decode: dst + alpha * d
// where d is not zero (alpha * d = q * (alpha * scale of the value's tile) exactly), dst left as
// it was where d is zero.
void check_decode_add(std::mt19937& rng, size_t n, int round, size_t scale_tile) {
  const std::vector<float> x = random_values(rng, n, round);
  EncodedBlock result;
  const Bytes block = encode_or_die(Values{x.data(), DType::kFloat32, n}, nullptr, 1.0f, Isa::kAuto,
                                    &result, scale_tile);
  std::vector<float> d(n);
  ASSERT_TRUE(decode(block, n, d.data()).ok());
  // Destination with signed zeros, NaN-free random values.
  std::vector<float> dst0 = random_values(rng, n, 4 + 5 * round);
  for (size_t i = 0; i < n; i += 3) dst0[i] = std::normal_distribution<float>()(rng);
  for (float alpha : {1.0f, 0.25f, -3.0f}) {
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE("round " + std::to_string(round) + " n " + std::to_string(n) + " scale_tile " +
                   std::to_string(scale_tile) + " alpha " + std::to_string(alpha) + " isa " +
                   isa_label(isa));
      std::vector<float> dst = dst0;
      const Status status = decode_add(block, n, alpha, dst.data(), DecodeOptions{isa});
      ASSERT_TRUE(status.ok()) << status.message();
      for (size_t i = 0; i < n; ++i) {
        float want = dst0[i];
        if (d[i] != 0.0f) {
          const float scaled = alpha * d[i];
          want = dst0[i] + scaled;
        }
        ASSERT_EQ(bits_of(dst[i]), bits_of(want))
            << "dst[" << i << "] = " << dst[i] << " (was " << dst0[i] << ", d " << d[i]
            << "), expected " << want;
      }
    }
  }
}

TEST(Invariant, DecodeAddAccumulates) {
  std::mt19937 rng(99);
  for (int round = 0; round < 30; ++round) check_decode_add(rng, random_size(rng), round, 0);
}

TEST(Invariant, TiledDecodeAddAccumulates) {
  std::mt19937 rng(98);
  int round = 0;
  for (size_t scale_tile : kScaleTiles) {
    for (size_t n : kTiledSizes) check_decode_add(rng, n, round++, scale_tile);
  }
}

TEST(Invariant, DecodeAddLeavesNegativeZeroAlone) {
  // x = {1, 0, 0.25, 0, 0, 0, 0}: every element but the first decodes to zero.
  const std::vector<float> x = {1.0f, 0.0f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f};
  EncodedBlock result;
  const Bytes block =
      encode_or_die(Values{x.data(), DType::kFloat32, 7}, nullptr, 1.0f, Isa::kAuto, &result);
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_label(isa));
    std::vector<float> dst(7, -0.0f);
    ASSERT_TRUE(decode_add(block, 7, 0.25f, dst.data(), DecodeOptions{isa}).ok());
    EXPECT_EQ(dst[0], 0.25f);
    for (size_t i = 1; i < 7; ++i) EXPECT_EQ(bits_of(dst[i]), 0x80000000u) << i;
  }
}

TEST(Invariant, RawBlocks) {
  std::mt19937 rng(5);
  for (int round = 0; round < 12; ++round) {
    const size_t n = random_size(rng);
    std::vector<float> x = random_values(rng, n, round);
    if (n > 2) {
      x[n / 2] = std::numeric_limits<float>::quiet_NaN();
      x[n - 1] = -std::numeric_limits<float>::infinity();
    }
    Bytes out(raw_block_bytes(n));
    EncodedBlock result;
    ASSERT_TRUE(encode_raw(Values{x.data(), DType::kFloat32, n}, out, &result).ok());
    EXPECT_EQ(result.bytes, raw_block_bytes(n));
    EXPECT_EQ(result.format, Format::kRaw);
    EXPECT_EQ(std::memcmp(out.data() + kHeaderBytes, x.data(), 4 * n), 0);
    BlockInfo info;
    ASSERT_TRUE(validate(out, n, &info).ok());
    EXPECT_EQ(info.format, Format::kRaw);
    EXPECT_EQ(info.payload_bytes, 4 * n);
    std::vector<float> dst0 = random_values(rng, n, 0);
    for (Isa isa : supported_isas()) {
      std::vector<float> d(n, 1.0f);
      ASSERT_TRUE(decode(out, n, d.data(), DecodeOptions{isa}).ok());
      EXPECT_EQ(std::memcmp(d.data(), x.data(), 4 * n), 0);
      for (float alpha : {1.0f, 0.25f}) {
        std::vector<float> dst = dst0;
        ASSERT_TRUE(decode_add(out, n, alpha, dst.data(), DecodeOptions{isa}).ok());
        for (size_t i = 0; i < n; ++i) {
          const float scaled = alpha * x[i];
          const float want = dst0[i] + scaled;
          if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(dst[i])) << i;
          } else {
            ASSERT_EQ(bits_of(dst[i]), bits_of(want)) << "isa " << isa_label(isa) << " i " << i;
          }
        }
      }
    }
  }
}

// Random values with one non-finite value (or, with `overflow`, one FLT_MAX that s = 1.5 makes
// a scale of Inf), as fp32 and bf16: the block is raw fp32 of the input and the error is left
// as it was.
void check_non_finite_goes_raw(uint32_t seed, size_t scale_tile, bool overflow = false) {
  std::mt19937 rng(seed);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), float_of(0xFF812345u)};
  const float sparsity = overflow ? 1.5f : 1.0f;
  for (int round = 0; round < 16; ++round) {
    const size_t n = std::max<size_t>(1, random_size(rng));
    std::vector<float> x = random_values(rng, n, round);
    const size_t at = rng() % n;
    x[at] = overflow ? std::numeric_limits<float>::max() : specials[round % 4];
    std::vector<float> e_old = random_values(rng, n, 0);
    if (overflow) e_old[at] = 0.0f;
    for (Isa isa : supported_isas()) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE("n " + std::to_string(n) + " at " + std::to_string(at) + " scale_tile " +
                     std::to_string(scale_tile) + " isa " + isa_label(isa));
        // bf16 input: the top halves of x (exact for the specials).
        std::vector<uint16_t> brain(n);
        for (size_t i = 0; i < n; ++i) brain[i] = static_cast<uint16_t>(bits_of(x[i]) >> 16);
        std::vector<float> widened(n);
        for (size_t i = 0; i < n; ++i) widened[i] = float_of(uint32_t{brain[i]} << 16);
        const void* data = dtype == DType::kFloat32 ? static_cast<const void*>(x.data())
                                                    : static_cast<const void*>(brain.data());
        const std::vector<float>& input = dtype == DType::kFloat32 ? x : widened;
        std::vector<float> e = e_old;
        EncodedBlock result;
        const Bytes block =
            encode_or_die(Values{data, dtype, n}, e.data(), sparsity, isa, &result, scale_tile);
        ASSERT_EQ(result.format, Format::kRaw);
        ASSERT_EQ(block.size(), raw_block_bytes(n));
        ASSERT_EQ(std::memcmp(e.data(), e_old.data(), 4 * n), 0) << "error buffer changed";
        ASSERT_EQ(std::memcmp(block.data() + kHeaderBytes, input.data(), 4 * n), 0);
        std::vector<float> d(n);
        ASSERT_TRUE(decode(block, n, d.data(), DecodeOptions{isa}).ok());
        EXPECT_EQ(bits_of(d[at]), bits_of(input[at]));
        EXPECT_EQ(std::isfinite(d[at]), overflow);
      }
    }
  }
}

TEST(Invariant, NonFiniteInputGoesRawAndKeepsTheError) { check_non_finite_goes_raw(11, 0); }

TEST(Invariant, TiledNonFiniteInputGoesRawAndKeepsTheError) {
  uint32_t seed = 12;
  for (size_t scale_tile : kScaleTiles) check_non_finite_goes_raw(seed++, scale_tile);
}

TEST(Invariant, TiledScaleOverflowGoesRawAndKeepsTheError) {
  uint32_t seed = 22;
  for (size_t scale_tile : {size_t{0}, size_t{5}, size_t{1280}, size_t{20480}}) {
    check_non_finite_goes_raw(seed++, scale_tile, true);
  }
}

TEST(Invariant, Float16IsWidenedExactly) {
  // Every fp16 bit pattern through encode_raw.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  Bytes out(raw_block_bytes(all.size()));
  EncodedBlock result;
  ASSERT_TRUE(encode_raw(Values{all.data(), DType::kFloat16, all.size()}, out, &result).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, out.data() + kHeaderBytes + 4 * i, 4);
    ASSERT_EQ(got, bits_of(half_to_float(all[i]))) << "fp16 0x" << std::hex << i;
  }
  // Every bf16 bit pattern.
  ASSERT_TRUE(encode_raw(Values{all.data(), DType::kBFloat16, all.size()}, out, &result).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, out.data() + kHeaderBytes + 4 * i, 4);
    ASSERT_EQ(got, static_cast<uint32_t>(i) << 16) << "bf16 0x" << std::hex << i;
  }
}

// fp16 and bf16 input encodes as its exactly widened fp32 values: the same block and error.
void check_half_precision(uint32_t seed, size_t scale_tile) {
  std::mt19937 rng(seed);
  for (int round = 0; round < 16; ++round) {
    const size_t n = random_size(rng);
    std::vector<uint16_t> half(n), brain(n);
    std::vector<float> half_wide(n), brain_wide(n);
    for (size_t i = 0; i < n; ++i) {
      // Finite fp16 patterns (exponent < 31); any bf16 pattern with a finite exponent.
      uint16_t h = static_cast<uint16_t>(rng());
      if (((h >> 10) & 0x1F) == 0x1F) h = static_cast<uint16_t>(h & 0xBFFF);
      half[i] = h;
      half_wide[i] = half_to_float(h);
      uint16_t b = static_cast<uint16_t>(rng());
      if (((b >> 7) & 0xFF) == 0xFF) b = static_cast<uint16_t>(b & 0xBFFF);
      if (round % 2 == 0) b = static_cast<uint16_t>(bits_of(std::ldexp(half_wide[i], 3)) >> 16);
      brain[i] = b;
      brain_wide[i] = float_of(uint32_t{b} << 16);
    }
    const std::vector<float> e_old = random_values(rng, n, 3);
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE("round " + std::to_string(round) + " n " + std::to_string(n) + " scale_tile " +
                   std::to_string(scale_tile) + " isa " + isa_label(isa));
      for (const auto& [dtype, narrow, wide] :
           {std::tuple{DType::kFloat16, &half, &half_wide},
            std::tuple{DType::kBFloat16, &brain, &brain_wide}}) {
        std::vector<float> e1 = e_old, e2 = e_old;
        EncodedBlock r1, r2;
        const Bytes b1 =
            encode_or_die(Values{narrow->data(), dtype, n}, e1.data(), 1.0f, isa, &r1, scale_tile);
        const Bytes b2 = encode_or_die(Values{wide->data(), DType::kFloat32, n}, e2.data(), 1.0f,
                                       isa, &r2, scale_tile);
        ASSERT_EQ(b1, b2);
        ASSERT_TRUE(n == 0 || std::memcmp(e1.data(), e2.data(), 4 * n) == 0);
        ASSERT_EQ(r1.format, r2.format);
      }
    }
  }
}

TEST(Invariant, HalfPrecisionEncodesLikeItsWidenedValues) { check_half_precision(3, 0); }

TEST(Invariant, TiledHalfPrecisionEncodesLikeItsWidenedValues) {
  uint32_t seed = 4;
  for (size_t scale_tile : kScaleTiles) check_half_precision(seed++, scale_tile);
}

TEST(Invariant, SparsityOutsideRangeIsRejected) {
  const std::vector<float> x = {1.0f, 2.0f};
  std::vector<float> e = {0.5f, 0.5f};
  for (float s : {0.0f, 0.999999f, -1.0f, 2.0f, 2.5f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    Bytes out(max_block_bytes(2), 0xAB);
    EncodedBlock result;
    const Status status = encode(Values{x.data(), DType::kFloat32, 2}, e.data(),
                                 EncodeOptions{s, Isa::kAuto}, out, &result);
    EXPECT_FALSE(status.ok()) << "sparsity " << s;
    EXPECT_NE(status.message().find("sparsity"), std::string::npos) << status.message();
    EXPECT_EQ(out, Bytes(max_block_bytes(2), 0xAB));
    EXPECT_EQ(e, (std::vector<float>{0.5f, 0.5f}));
  }
  for (float s : {1.0f, 1.5f, std::nextafter(2.0f, 0.0f)}) {
    Bytes out(max_block_bytes(2));
    EncodedBlock result;
    EXPECT_TRUE(encode(Values{x.data(), DType::kFloat32, 2}, nullptr, EncodeOptions{s, Isa::kAuto},
                       out, &result)
                    .ok())
        << s;
  }
}

TEST(Invariant, ScaleTileOutsideRangeIsRejected) {
  const std::vector<float> x(12, 0.5f);
  std::vector<float> e(12, 0.25f);
  for (size_t scale_tile : {size_t{1}, size_t{3}, size_t{4}, size_t{7}, size_t{12}, size_t{20481},
                            size_t{20485}, size_t{40960}, SIZE_MAX}) {
    SCOPED_TRACE("scale_tile " + std::to_string(scale_tile));
    EXPECT_FALSE(scale_tile_valid(scale_tile));
    Bytes out(max_block_bytes(12), 0xAB);
    EncodedBlock result;
    const Status status = encode(Values{x.data(), DType::kFloat32, 12}, e.data(),
                                 EncodeOptions{1.0f, Isa::kAuto, scale_tile}, out, &result);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("scale tile of " + std::to_string(scale_tile)),
              std::string::npos)
        << status.message();
    EXPECT_EQ(out, Bytes(max_block_bytes(12), 0xAB));
    EXPECT_EQ(e, std::vector<float>(12, 0.25f));
  }
  for (size_t scale_tile :
       {size_t{0}, size_t{5}, size_t{10}, size_t{1280}, size_t{20475}, size_t{20480}}) {
    SCOPED_TRACE("scale_tile " + std::to_string(scale_tile));
    EXPECT_TRUE(scale_tile_valid(scale_tile));
    Bytes out(max_block_bytes(12));
    EncodedBlock result;
    const Status status = encode(Values{x.data(), DType::kFloat32, 12}, nullptr,
                                 EncodeOptions{1.0f, Isa::kAuto, scale_tile}, out, &result);
    EXPECT_TRUE(status.ok()) << status.message();
  }
}

// A v2 block never exceeds max_block_bytes (16 + 4n): blocks whose every group is a literal
// (no zero run shrinks them), for every n up to a few tiles of the smallest scale tiles and at
// the edges of larger ones, written into exactly max_block_bytes with guard bytes after it.
TEST(Invariant, TiledBlocksFitMaxBlockBytes) {
  for (size_t scale_tile : {size_t{5}, size_t{10}, size_t{15}, size_t{1280}, size_t{20480}}) {
    std::vector<size_t> sizes;
    for (size_t n = 0; n <= 3 * scale_tile + 7 && n <= 60; ++n) sizes.push_back(n);
    for (size_t n : {scale_tile + 1, 2 * scale_tile + 1}) sizes.push_back(n);
    for (size_t n : sizes) {
      SCOPED_TRACE("n " + std::to_string(n) + " scale_tile " + std::to_string(scale_tile));
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? 1.0f : -1.0f;
      const size_t cap = max_block_bytes(n);
      Bytes out(cap + 64, 0xCD);
      EncodedBlock result;
      const Status status =
          encode(Values{x.data(), DType::kFloat32, n}, nullptr,
                 EncodeOptions{1.0f, Isa::kAuto, scale_tile}, std::span(out.data(), cap), &result);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_LE(result.bytes, cap);
      EXPECT_EQ(Bytes(out.begin() + static_cast<std::ptrdiff_t>(cap), out.end()), Bytes(64, 0xCD))
          << "wrote past max_block_bytes";
      EXPECT_EQ(result.format, writes_v2(n, scale_tile) ? Format::kThreeLCTiled : Format::kThreeLC);
    }
  }
}

TEST(Invariant, SmallOutputBufferIsRejected) {
  std::vector<float> x(100, 0.5f);
  std::vector<float> e(100, 0.0f);
  Bytes out(max_block_bytes(100) - 1, 0xCD);
  EncodedBlock result;
  Status status =
      encode(Values{x.data(), DType::kFloat32, 100}, e.data(), EncodeOptions{}, out, &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("output buffer"), std::string::npos) << status.message();
  EXPECT_EQ(out, Bytes(max_block_bytes(100) - 1, 0xCD));
  EXPECT_EQ(e, std::vector<float>(100, 0.0f));
  Bytes raw(raw_block_bytes(100) - 1);
  status = encode_raw(Values{x.data(), DType::kFloat32, 100}, raw, &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("output buffer"), std::string::npos) << status.message();
  Bytes header_only(kHeaderBytes - 1);
  EXPECT_FALSE(
      encode(Values{nullptr, DType::kFloat32, 0}, nullptr, EncodeOptions{}, header_only, &result)
          .ok());
}

TEST(Invariant, NullValuesAreRejected) {
  Bytes out(max_block_bytes(4));
  EncodedBlock result;
  const Status status =
      encode(Values{nullptr, DType::kFloat32, 4}, nullptr, EncodeOptions{}, out, &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("null"), std::string::npos) << status.message();
}

// --- C ABI -----------------------------------------------------------------------------------

TEST(CodecCApi, EncodeDecodeRoundTrip) {
  const std::vector<float> x = {0.75f, -0.75f, 0.25f, -1.0f};
  std::vector<float> e(4, 0.0f);
  EXPECT_EQ(threelc_codec_max_block_bytes(4), 32u);
  Bytes out(threelc_codec_max_block_bytes(4));
  size_t bytes = 0;
  ASSERT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 4, e.data(), 1.0f, out.data(),
                                 out.size(), &bytes),
            THREELC_OK)
      << threelc_codec_last_error();
  EXPECT_EQ(bytes, 19u);
  EXPECT_EQ(e, (std::vector<float>{-0.25f, 0.25f, 0.25f, 0.0f}));
  uint32_t count = 0;
  int format = -1;
  float scale = 0.0f;
  ASSERT_EQ(threelc_codec_inspect(out.data(), bytes, &count, &format, &scale), THREELC_OK);
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(format, 1);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(threelc_codec_inspect(out.data(), bytes, nullptr, nullptr, nullptr), THREELC_OK);
  std::vector<float> d(4);
  ASSERT_EQ(threelc_codec_decode(out.data(), bytes, 4, d.data()), THREELC_OK);
  EXPECT_EQ(d, (std::vector<float>{1.0f, -1.0f, 0.0f, -1.0f}));
  ASSERT_EQ(threelc_codec_decode(out.data(), bytes, SIZE_MAX, d.data()), THREELC_OK);
  std::vector<float> acc = {1.0f, 1.0f, -0.0f, 1.0f};
  ASSERT_EQ(threelc_codec_decode_add(out.data(), bytes, 4, 0.5f, acc.data()), THREELC_OK);
  EXPECT_EQ(acc, (std::vector<float>{1.5f, 0.5f, 0.0f, 0.5f}));
  EXPECT_EQ(bits_of(acc[2]), 0x80000000u);

  // Half-precision inputs and raw encoding.
  const std::vector<uint16_t> half = {0x3A00, 0xBA00, 0x3400, 0xBC00};
  Bytes out16(threelc_codec_max_block_bytes(4));
  size_t bytes16 = 0;
  ASSERT_EQ(threelc_codec_encode(half.data(), THREELC_FLOAT16, 4, nullptr, 1.0f, out16.data(),
                                 out16.size(), &bytes16),
            THREELC_OK);
  EXPECT_EQ(Bytes(out16.begin(), out16.begin() + 19), Bytes(out.begin(), out.begin() + 19));
  const std::vector<uint16_t> brain = {0x3F80, 0xC000};
  Bytes raw(24);
  size_t raw_bytes = 0;
  ASSERT_EQ(threelc_codec_encode_raw(brain.data(), THREELC_BFLOAT16, 2, raw.data(), raw.size(),
                                     &raw_bytes),
            THREELC_OK);
  EXPECT_EQ(raw_bytes, 24u);
  ASSERT_EQ(threelc_codec_inspect(raw.data(), raw_bytes, &count, &format, &scale), THREELC_OK);
  EXPECT_EQ(format, 0);
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(threelc_codec_decode(raw.data(), raw_bytes, 2, d.data()), THREELC_OK);
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(d[1], -2.0f);

  const std::string isa = threelc_codec_isa();
  EXPECT_TRUE(isa == "scalar" || isa == "avx2" || isa == "avx512") << isa;
}

TEST(CodecCApi, EncodeTiled) {
  // 7 values, scale_tile 5: tiles {0..4} (scale 2) and {5, 6} (scale 0.5); the same block and
  // error as the C++ encoder's, format 2 with the larger scale in the header.
  const std::vector<float> x = {2.0f, -1.5f, 0.5f, 1.25f, 0.0f, 0.5f, -0.125f};
  std::vector<float> e(7, 0.0f), e_cpp(7, 0.0f);
  Bytes out(threelc_codec_max_block_bytes(7));
  size_t bytes = 0;
  ASSERT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, e.data(), 1.0f, 5, out.data(),
                                       out.size(), &bytes),
            THREELC_OK)
      << threelc_codec_last_error();
  EncodedBlock result;
  const Bytes cpp = encode_or_die(Values{x.data(), DType::kFloat32, 7}, e_cpp.data(), 1.0f,
                                  Isa::kAuto, &result, 5);
  ASSERT_EQ(bytes, 16u + 6u * 2u + 2u);
  EXPECT_EQ(Bytes(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(bytes)), cpp);
  EXPECT_EQ(e, e_cpp);
  EXPECT_EQ(e, (std::vector<float>{0.0f, 0.5f, 0.5f, -0.75f, 0.0f, 0.0f, -0.125f}));
  uint32_t count = 0;
  int format = -1;
  float scale = 0.0f;
  ASSERT_EQ(threelc_codec_inspect(out.data(), bytes, &count, &format, &scale), THREELC_OK);
  EXPECT_EQ(count, 7u);
  EXPECT_EQ(format, 2);
  EXPECT_EQ(scale, 2.0f);
  std::vector<float> d(7);
  ASSERT_EQ(threelc_codec_decode(out.data(), bytes, 7, d.data()), THREELC_OK);
  EXPECT_EQ(d, (std::vector<float>{2.0f, -2.0f, 0.0f, 2.0f, 0.0f, 0.5f, 0.0f}));
  std::vector<float> acc(7, 1.0f);
  ASSERT_EQ(threelc_codec_decode_add(out.data(), bytes, 7, 0.5f, acc.data()), THREELC_OK);
  EXPECT_EQ(acc, (std::vector<float>{2.0f, 0.0f, 1.0f, 2.0f, 1.0f, 1.25f, 1.0f}));

  // fp16 input gives the same block; scale_tile 0 is threelc_codec_encode.
  const std::vector<uint16_t> half = {0x4000, 0xBE00, 0x3800, 0x3D00, 0x0000, 0x3800, 0xB000};
  Bytes out16(threelc_codec_max_block_bytes(7));
  size_t bytes16 = 0;
  ASSERT_EQ(threelc_codec_encode_tiled(half.data(), THREELC_FLOAT16, 7, nullptr, 1.0f, 5,
                                       out16.data(), out16.size(), &bytes16),
            THREELC_OK);
  EXPECT_EQ(Bytes(out16.begin(), out16.begin() + static_cast<std::ptrdiff_t>(bytes16)), cpp);
  Bytes v1(threelc_codec_max_block_bytes(7)), v1_tiled(threelc_codec_max_block_bytes(7));
  size_t v1_bytes = 0, v1_tiled_bytes = 0;
  ASSERT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 7, nullptr, 1.5f, v1.data(), v1.size(),
                                 &v1_bytes),
            THREELC_OK);
  ASSERT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 1.5f, 0,
                                       v1_tiled.data(), v1_tiled.size(), &v1_tiled_bytes),
            THREELC_OK);
  EXPECT_EQ(v1_bytes, v1_tiled_bytes);
  EXPECT_EQ(v1, v1_tiled);
  EXPECT_EQ(v1[0], 1);

  // Refusals: EINVAL and a message naming the argument; nothing written.
  auto last = [] { return std::string(threelc_codec_last_error()); };
  for (size_t scale_tile : {size_t{3}, size_t{7}, size_t{20485}}) {
    Bytes untouched(threelc_codec_max_block_bytes(7), 0xAB);
    std::vector<float> e_kept(7, 0.25f);
    EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, e_kept.data(), 1.0f,
                                         scale_tile, untouched.data(), untouched.size(), &bytes),
              THREELC_EINVAL);
    EXPECT_NE(last().find("scale tile of " + std::to_string(scale_tile)), std::string::npos)
        << last();
    EXPECT_EQ(untouched, Bytes(threelc_codec_max_block_bytes(7), 0xAB));
    EXPECT_EQ(e_kept, std::vector<float>(7, 0.25f));
  }
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_INT32, 7, nullptr, 1.0f, 5, out.data(),
                                       out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("dtype"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 1.0f, 5, nullptr,
                                       out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 2.0f, 5, out.data(),
                                       out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("sparsity"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 1.0f, 5, out.data(),
                                       out.size() - 1, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("output buffer"), std::string::npos) << last();
}

TEST(CodecCApi, ErrorCodesAndMessages) {
  const std::vector<float> x = {1.0f, 2.0f};
  Bytes out(threelc_codec_max_block_bytes(2));
  size_t bytes = 0;
  auto last = [] { return std::string(threelc_codec_last_error()); };

  for (int dtype : std::initializer_list<int>{THREELC_UINT8, THREELC_INT8, THREELC_INT32,
                                              THREELC_INT64, THREELC_FLOAT64, 42, -1}) {
    EXPECT_EQ(
        threelc_codec_encode(x.data(), dtype, 2, nullptr, 1.0f, out.data(), out.size(), &bytes),
        THREELC_EINVAL);
    EXPECT_NE(last().find("dtype"), std::string::npos) << last();
    EXPECT_EQ(threelc_codec_encode_raw(x.data(), dtype, 2, out.data(), out.size(), &bytes),
              THREELC_EINVAL);
    EXPECT_NE(last().find("dtype"), std::string::npos) << last();
  }
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 2.0f, out.data(),
                                 out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("sparsity"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, nullptr, 100, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, out.data(),
                                 out.size(), nullptr),
            THREELC_EINVAL);
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, out.data(),
                                 out.size() - 1, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("output buffer"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_raw(x.data(), THREELC_FLOAT32, 2, out.data(), 23, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("output buffer"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_raw(x.data(), THREELC_FLOAT32, 2, nullptr, 24, &bytes),
            THREELC_EINVAL);

  // Malformed blocks: -2 and a message.
  ASSERT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, out.data(),
                                 out.size(), &bytes),
            THREELC_OK);
  std::vector<float> d = {5.0f, 5.0f};
  EXPECT_EQ(threelc_codec_decode(out.data(), bytes, 3, d.data()), THREELC_EMALFORMED);
  EXPECT_NE(last().find("expects 3"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_decode_add(out.data(), bytes - 1, 2, 1.0f, d.data()), THREELC_EMALFORMED);
  EXPECT_NE(last().find("payload"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_inspect(out.data(), 10, nullptr, nullptr, nullptr), THREELC_EMALFORMED);
  EXPECT_NE(last().find("header"), std::string::npos) << last();
  // Null pointers are bad arguments (-1); a null, empty block is merely too short (-2).
  EXPECT_EQ(threelc_codec_inspect(nullptr, 100, nullptr, nullptr, nullptr), THREELC_EINVAL);
  EXPECT_NE(last().find("block pointer is null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_decode(nullptr, 0, SIZE_MAX, d.data()), THREELC_EMALFORMED);
  EXPECT_EQ(d, (std::vector<float>{5.0f, 5.0f}));
  // A null destination is a bad argument.
  EXPECT_EQ(threelc_codec_decode(out.data(), bytes, 2, nullptr), THREELC_EINVAL);
  EXPECT_NE(last().find("destination pointer is null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_decode_add(out.data(), bytes, 2, 1.0f, nullptr), THREELC_EINVAL);

  // last_error is per thread: a fresh thread sees "".
  std::string other = "unset";
  std::thread([&] { other = threelc_codec_last_error(); }).join();
  EXPECT_EQ(other, "");
}

}  // namespace
}  // namespace threelc::compression
