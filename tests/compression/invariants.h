// What the codec's property tests share: random inputs and sizes, an independent quantizer to
// check decodes against, the checks of the error-feedback identity, and the sizes and scale
// tiles of the format v2 tests.
#pragma once

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

namespace threelc::compression::invariants {

using test_support::bits_of;
using test_support::Bytes;
using test_support::float_of;

// Independent fp16 -> fp32 (exact): the value (-1)^s * m * 2^(e - 25) built in double.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u;
  const int exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return float_of(sign << 31 | 0x7F800000u | mantissa << 13);
  const double magnitude = exponent == 0
                               ? std::ldexp(static_cast<double>(mantissa), -24)
                               : std::ldexp(static_cast<double>(mantissa + 1024u), exponent - 25);
  return static_cast<float>(sign != 0 ? -magnitude : magnitude);
}

inline std::string isa_label(Isa isa) { return std::string(isa_name(isa)); }

// Random test vectors of several shapes: dense normal, wide dynamic range, sparse, constant.
inline std::vector<float> random_values(std::mt19937& rng, size_t n, int kind) {
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

inline size_t random_size(std::mt19937& rng) {
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
inline Quantized reference_quantize(const std::vector<float>& x, const std::vector<float>& e,
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

inline Bytes encode_or_die(const Values& values, float* error, float sparsity, Isa isa,
                           EncodedBlock* result, size_t scale_tile = 0) {
  Bytes out(max_block_bytes(values.count));
  const Status status =
      encode(values, error, EncodeOptions{sparsity, isa, scale_tile}, out, result);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_LE(result->bytes, out.size());
  out.resize(std::min(result->bytes, out.size()));
  return out;
}

inline uint32_t le_u32(const Bytes& b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}

// Whether encoding n values with this scale_tile writes format v2: a scale per tile, when
// there is more than one tile (a block of one tile is quantized the same and written as v1).
inline bool writes_v2(size_t n, size_t scale_tile) { return scale_tile != 0 && n > scale_tile; }

// Encodes x with the prior error e_old on every ISA (scalar first) and checks against the
// reference: the header, the block's size from its tile tables, each tile's scale (v2: the
// scale table), the error afterwards, the decoded values (each tile's largest magnitude is its
// max |a| * s), d + e_new == x + e_old, and that every ISA writes the scalar block.
inline void check_error_feedback(const std::vector<float>& x, const std::vector<float>& e_old,
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
inline const size_t kTiledSizes[] = {0, 1, 4, 5, 6, 1279, 1280, 1281, 20481, 100003};
inline const size_t kScaleTiles[] = {5, 1280, 20480};

}  // namespace threelc::compression::invariants
