// What the SIMD identity tests share: the ISAs under test, first mismatches of floats and
// bytes, and check_identity (every ISA's blocks, error buffers and decodes against the scalar
// reference, in format v1 and v2 with several scale tiles); the inputs' sizes and sparsities.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels.h"
#include "test_support.h"
#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"
#include "threelc/compression/float16.h"
#include "threelc/compression/float16_arrays.h"

namespace threelc::compression::simd_identity {

using test_support::bits_of;
using test_support::Bytes;
using test_support::float_of;

// ISAs other than the reference that this CPU runs, plus kAuto (whatever dispatch picks,
// THREELC_CODEC_ISA included).
inline std::vector<Isa> isas_under_test() {
  std::vector<Isa> isas;
  for (Isa isa : supported_isas()) {
    if (isa != Isa::kScalar) isas.push_back(isa);
  }
  isas.push_back(Isa::kAuto);
  return isas;
}

inline std::string name(Isa isa) { return std::string(isa_name(isa)); }

// First index where two float arrays differ bitwise, or -1.
inline long first_float_mismatch(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bits_of(a[i]) != bits_of(b[i])) return static_cast<long>(i);
  }
  return -1;
}

// `what` is a stream expression (a << b), so it must stay unparenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define EXPECT_SAME_FLOATS(a, b, n, what)                               \
  do {                                                                  \
    const long at_ = first_float_mismatch((a), (b), (n));               \
    EXPECT_EQ(at_, -1) << what << ": first mismatch at " << at_ << ": " \
                       << (at_ >= 0 ? bits_of((a)[at_]) : 0u) << " vs " \
                       << (at_ >= 0 ? bits_of((b)[at_]) : 0u);          \
  } while (0)
// NOLINTEND(bugprone-macro-parentheses)

inline long first_byte_mismatch(const Bytes& a, const Bytes& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<long>(n);
}

struct Encoded {
  Bytes block;
  std::vector<float> error;  // after the encode (empty when encoded without error)
  EncodedBlock result;
};

// Encodes with `isa` (and scale_tile: 0 is format v1); the error buffer is copied into storage
// at `error_offset` floats past a 64-byte boundary so that the SIMD paths also meet misaligned
// error buffers.
inline Encoded encode_with(Isa isa, const Values& values, const std::vector<float>* error, float s,
                           size_t error_offset = 0, size_t scale_tile = 0) {
  Encoded enc;
  enc.block.assign(max_block_bytes(values.count), 0xCD);
  std::vector<float> storage;
  float* e = nullptr;
  if (error != nullptr) {
    storage.resize(values.count + 32);
    const uintptr_t base = reinterpret_cast<uintptr_t>(storage.data());
    const size_t skew = ((64 - base % 64) % 64) / sizeof(float);
    e = storage.data() + skew + error_offset;
    if (!error->empty()) std::memcpy(e, error->data(), error->size() * sizeof(float));
  }
  EncodeOptions options;
  options.sparsity = s;
  options.isa = isa;
  options.scale_tile = scale_tile;
  const Status status = encode(values, e, options, enc.block, &enc.result);
  EXPECT_TRUE(status.ok()) << status.message();
  enc.block.resize(enc.result.bytes);
  if (e != nullptr) enc.error.assign(e, e + values.count);
  return enc;
}

// Checks one input encoded with one scale_tile under every ISA against the scalar reference:
// the block, the error buffer, decode and decode_add (onto a destination holding random
// values, +-0 and denormals).
inline void check_identity_one_format(const Values& values, const std::vector<float>* error,
                                      float s, const std::string& label, size_t error_offset,
                                      size_t scale_tile) {
  SCOPED_TRACE(label + " n=" + std::to_string(values.count) + " s=" + std::to_string(s) +
               " scale_tile=" + std::to_string(scale_tile));
  const Encoded ref = encode_with(Isa::kScalar, values, error, s, error_offset, scale_tile);
  const size_t n = values.count;
  if (ref.result.format != Format::kRaw) {
    EXPECT_EQ(ref.result.format,
              scale_tile != 0 && n > scale_tile ? Format::kThreeLCTiled : Format::kThreeLC);
  }

  std::vector<float> base_dst(n);
  std::mt19937 rng(static_cast<uint32_t>(n * 7 + 1));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    switch (i % 7) {
      case 0:
        base_dst[i] = -0.0f;
        break;
      case 1:
        base_dst[i] = 0.0f;
        break;
      case 2:
        base_dst[i] = float_of(0x00000123u);
        break;  // denormal
      default:
        base_dst[i] = normal(rng);
    }
  }
  std::vector<float> ref_decoded(n, 7.0f);
  ASSERT_TRUE(decode(ref.block, n, ref_decoded.data(), {Isa::kScalar}).ok());
  const float alphas[] = {1.0f, 0.25f, -3.0f};
  std::vector<std::vector<float>> ref_added;
  for (float alpha : alphas) {
    std::vector<float> dst = base_dst;
    ASSERT_TRUE(decode_add(ref.block, n, alpha, dst.data(), {Isa::kScalar}).ok());
    ref_added.push_back(std::move(dst));
  }

  for (Isa isa : isas_under_test()) {
    SCOPED_TRACE("isa=" + name(isa));
    const Encoded got = encode_with(isa, values, error, s, error_offset, scale_tile);
    EXPECT_EQ(got.result.format, ref.result.format);
    EXPECT_EQ(bits_of(got.result.scale), bits_of(ref.result.scale));
    const long at = first_byte_mismatch(got.block, ref.block);
    EXPECT_EQ(at, -1) << "block bytes differ at " << at << " (sizes " << got.block.size() << " vs "
                      << ref.block.size() << ")";
    ASSERT_EQ(got.error.size(), ref.error.size());
    EXPECT_SAME_FLOATS(got.error.data(), ref.error.data(), got.error.size(), "error buffer");

    std::vector<float> decoded(n, 7.0f);
    ASSERT_TRUE(decode(ref.block, n, decoded.data(), {isa}).ok());
    EXPECT_SAME_FLOATS(decoded.data(), ref_decoded.data(), n, "decode");
    for (size_t a = 0; a < std::size(alphas); ++a) {
      std::vector<float> dst = base_dst;
      ASSERT_TRUE(decode_add(ref.block, n, alphas[a], dst.data(), {isa}).ok());
      EXPECT_SAME_FLOATS(dst.data(), ref_added[a].data(), n,
                         "decode_add alpha=" + std::to_string(alphas[a]));
    }
  }
}

// Scale tiles every input is checked with: 0 (format v1), then format v2 with tiles of 5
// values (the smallest), 1280 and 20480 (the largest). A scale tile of at least n values writes
// the v1 block, so it is checked only for larger n.
inline const size_t kScaleTiles[] = {0, 5, 1280, 20480};

inline void check_identity(const Values& values, const std::vector<float>* error, float s,
                           const std::string& label, size_t error_offset = 0) {
  for (size_t scale_tile : kScaleTiles) {
    if (scale_tile != 0 && values.count <= scale_tile) continue;
    check_identity_one_format(values, error, s, label, error_offset, scale_tile);
  }
}

inline Values f32(const std::vector<float>& x) {
  return Values{x.data(), DType::kFloat32, x.size()};
}

inline std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

inline const size_t kSizes[] = {0,     1,     2,     3,     4,     5,     6,
                                7,     8,     9,     15,    16,    17,    31,
                                33,    63,    64,    65,    79,    80,    81,
                                159,   161,   319,   321,   1000,  4095,  4096,
                                4097,  5119,  5121,  16383, 20475, 20476, 20479,
                                20480, 20481, 20485, 20496, 40960, 40961, 3 * 20480 + 12345};
inline const float kSparsities[] = {1.0f, 1.5f, 1.99f};

}  // namespace threelc::compression::simd_identity
