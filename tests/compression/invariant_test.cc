// Property tests of the codec on random inputs: the error-feedback identity, decode of the
// quantized values, decode_add, raw blocks and non-finite input, for format v1 (one scale per
// block) and v2 (a scale per tile of scale_tile values). Half-precision input and argument
// checks: invariant_inputs_test.cc; the C ABI: codec_c_api_test.cc.
#include <gtest/gtest.h>

#include "invariants.h"

namespace threelc::compression::invariants {
namespace {

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

}  // namespace
}  // namespace threelc::compression::invariants
