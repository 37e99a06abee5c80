// Property tests of the codec on random inputs: the error-feedback identity, decode of the
// quantized values, decode_add, raw blocks, fp16/bf16 widening, argument checks and the C ABI.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
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
  float scale = 0.0f;
  std::vector<float> decoded;  // q * scale
  std::vector<float> error;    // a - q * scale
};

// The spec's steps 1-4, written independently of the codec (fp32 throughout).
Quantized reference_quantize(const std::vector<float>& x, const std::vector<float>& e,
                             float sparsity) {
  Quantized r;
  std::vector<float> a(x.size());
  float m = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    a[i] = x[i] + e[i];
    m = std::max(m, std::fabs(a[i]));
  }
  r.scale = m * sparsity;
  const float h = 0.5f * r.scale;
  r.decoded.resize(x.size());
  r.error.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float q = a[i] > h ? 1.0f : (a[i] < -h ? -1.0f : 0.0f);
    r.decoded[i] = q * r.scale;
    if (q == 0.0f) r.decoded[i] = 0.0f;  // decoded zeros are +0.0
    r.error[i] = a[i] - r.decoded[i];
  }
  return r;
}

Bytes encode_or_die(const Values& values, float* error, float sparsity, Isa isa,
                    EncodedBlock* result) {
  Bytes out(max_block_bytes(values.count));
  const Status status = encode(values, error, EncodeOptions{sparsity, isa}, out, result);
  EXPECT_TRUE(status.ok()) << status.message();
  out.resize(result->bytes);
  return out;
}

TEST(Invariant, ErrorFeedbackIdentityAndDecode) {
  std::mt19937 rng(20240601);
  for (int round = 0; round < 60; ++round) {
    const size_t n = random_size(rng);
    const std::vector<float> x = random_values(rng, n, round);
    std::vector<float> e_old = random_values(rng, n, round / 5 + 1);
    if (round % 3 == 0) std::fill(e_old.begin(), e_old.end(), 0.0f);
    const float sparsity = std::array<float, 4>{1.0f, 1.25f, 1.5f, 1.9999999f}[round % 4];
    const Quantized expected = reference_quantize(x, e_old, sparsity);
    Bytes scalar_block;
    // One ISA per call, so that a failing ISA does not hide the results of the others.
    auto check_isa = [&](Isa isa) {
      std::vector<float> e = e_old;
      EncodedBlock result;
      const Bytes block =
          encode_or_die(Values{x.data(), DType::kFloat32, n}, e.data(), sparsity, isa, &result);
      ASSERT_EQ(result.format, Format::kThreeLC);
      ASSERT_EQ(bits_of(result.scale), bits_of(expected.scale));
      ASSERT_LE(block.size(), kHeaderBytes + 2 * tile_count(n) + (n + 4) / 5 + tile_count(n));
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
    };
    for (Isa isa : supported_isas()) {  // scalar first
      SCOPED_TRACE("round " + std::to_string(round) + " n " + std::to_string(n) + " isa " +
                   isa_label(isa));
      check_isa(isa);
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

TEST(Invariant, DecodeAddAccumulates) {
  std::mt19937 rng(99);
  for (int round = 0; round < 30; ++round) {
    const size_t n = random_size(rng);
    const std::vector<float> x = random_values(rng, n, round);
    EncodedBlock result;
    const Bytes block =
        encode_or_die(Values{x.data(), DType::kFloat32, n}, nullptr, 1.0f, Isa::kAuto, &result);
    std::vector<float> d(n);
    ASSERT_TRUE(decode(block, n, d.data()).ok());
    // Destination with signed zeros, NaN-free random values.
    std::vector<float> dst0 = random_values(rng, n, 4 + 5 * round);
    for (size_t i = 0; i < n; i += 3) dst0[i] = std::normal_distribution<float>()(rng);
    for (float alpha : {1.0f, 0.25f, -3.0f}) {
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE("round " + std::to_string(round) + " alpha " + std::to_string(alpha) +
                     " isa " + isa_label(isa));
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

TEST(Invariant, NonFiniteInputGoesRawAndKeepsTheError) {
  std::mt19937 rng(11);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), float_of(0xFF812345u)};
  for (int round = 0; round < 16; ++round) {
    const size_t n = std::max<size_t>(1, random_size(rng));
    std::vector<float> x = random_values(rng, n, round);
    const size_t at = rng() % n;
    x[at] = specials[round % 4];
    const std::vector<float> e_old = random_values(rng, n, 0);
    for (Isa isa : supported_isas()) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        SCOPED_TRACE("n " + std::to_string(n) + " isa " + isa_label(isa));
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
        const Bytes block = encode_or_die(Values{data, dtype, n}, e.data(), 1.0f, isa, &result);
        ASSERT_EQ(result.format, Format::kRaw);
        ASSERT_EQ(block.size(), raw_block_bytes(n));
        ASSERT_EQ(std::memcmp(e.data(), e_old.data(), 4 * n), 0) << "error buffer changed";
        ASSERT_EQ(std::memcmp(block.data() + kHeaderBytes, input.data(), 4 * n), 0);
        std::vector<float> d(n);
        ASSERT_TRUE(decode(block, n, d.data(), DecodeOptions{isa}).ok());
        EXPECT_EQ(bits_of(d[at]), bits_of(input[at]));
        EXPECT_FALSE(std::isfinite(d[at]));
      }
    }
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

TEST(Invariant, HalfPrecisionEncodesLikeItsWidenedValues) {
  std::mt19937 rng(3);
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
      SCOPED_TRACE("round " + std::to_string(round) + " isa " + isa_label(isa));
      for (const auto& [dtype, narrow, wide] :
           {std::tuple{DType::kFloat16, &half, &half_wide},
            std::tuple{DType::kBFloat16, &brain, &brain_wide}}) {
        std::vector<float> e1 = e_old, e2 = e_old;
        EncodedBlock r1, r2;
        const Bytes b1 = encode_or_die(Values{narrow->data(), dtype, n}, e1.data(), 1.0f, isa, &r1);
        const Bytes b2 =
            encode_or_die(Values{wide->data(), DType::kFloat32, n}, e2.data(), 1.0f, isa, &r2);
        ASSERT_EQ(b1, b2);
        ASSERT_EQ(std::memcmp(e1.data(), e2.data(), 4 * n), 0);
      }
    }
  }
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
