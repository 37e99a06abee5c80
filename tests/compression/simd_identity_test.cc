// Every SIMD kernel set must be bit-identical to the scalar reference (kernels_reference.h):
// identical blocks, identical error buffers, identical decoded floats, for every ISA this CPU
// runs (supported_isas()), on random inputs of many sizes and on adversarial ones (zeros,
// ties at +-h, denormals, NaN/Inf, a scale that overflows, e == nullptr, fp16/bf16 input),
// each in format v1 and in format v2 (a scale per tile) with several scale tiles.
// The kernels one by one: simd_kernels_test.cc; the fp16 arrays: float16_arrays_test.cc.
#include <gtest/gtest.h>

#include "simd_identity.h"

namespace threelc::compression::simd_identity {
namespace {

TEST(SimdIdentity, RandomGaussianAllSizes) {
  for (size_t n : kSizes) {
    const std::vector<float> x = gaussian(n, static_cast<uint32_t>(n) + 11);
    const std::vector<float> e = gaussian(n, static_cast<uint32_t>(n) + 12, 0.3f);
    for (float s : kSparsities) {
      check_identity(f32(x), &e, s, "gaussian");
      check_identity(f32(x), nullptr, s, "gaussian e=null");
    }
  }
}

TEST(SimdIdentity, MisalignedErrorBuffer) {
  for (size_t n : {size_t{100}, size_t{20480}, size_t{2 * 20480 + 77}}) {
    const std::vector<float> x = gaussian(n, 5);
    const std::vector<float> e = gaussian(n, 6, 0.5f);
    for (size_t offset : {1, 2, 3, 5, 15}) check_identity(f32(x), &e, 1.0f, "misaligned", offset);
  }
}

// Error feedback over several steps: the error carried by each ISA stays identical.
void check_error_feedback_steps(size_t scale_tile) {
  const size_t n = 2 * 20480 + 999;
  for (Isa isa : isas_under_test()) {
    SCOPED_TRACE("isa=" + name(isa) + " scale_tile=" + std::to_string(scale_tile));
    std::vector<float> e_ref(n, 0.0f), e_isa(n, 0.0f);
    for (uint32_t step = 0; step < 6; ++step) {
      const std::vector<float> x = gaussian(n, 100 + step);
      Bytes b_ref(max_block_bytes(n)), b_isa(max_block_bytes(n));
      EncodedBlock r_ref, r_isa;
      ASSERT_TRUE(
          encode(f32(x), e_ref.data(), {1.0f, Isa::kScalar, scale_tile}, b_ref, &r_ref).ok());
      ASSERT_TRUE(encode(f32(x), e_isa.data(), {1.0f, isa, scale_tile}, b_isa, &r_isa).ok());
      b_ref.resize(r_ref.bytes);
      b_isa.resize(r_isa.bytes);
      EXPECT_EQ(b_ref, b_isa) << "step " << step;
      EXPECT_SAME_FLOATS(e_isa.data(), e_ref.data(), n, "error after step " << step);
    }
  }
}

TEST(SimdIdentity, ErrorFeedbackSteps) { check_error_feedback_steps(0); }

TEST(SimdIdentity, TiledErrorFeedbackSteps) {
  for (size_t scale_tile : {size_t{5}, size_t{1280}, size_t{20480}}) {
    check_error_feedback_steps(scale_tile);
  }
}

// Format v2 with scale tiles of many sizes (odd group counts, around the SIMD widths of 16 and
// 64 values, the largest below 20480) at the edges of their tiles.
TEST(SimdIdentity, TiledScaleTilesOfManySizes) {
  for (size_t scale_tile : {size_t{10}, size_t{15}, size_t{35}, size_t{65}, size_t{80}, size_t{320},
                            size_t{645}, size_t{20475}}) {
    for (size_t n : {scale_tile + 1, 2 * scale_tile - 1, 3 * scale_tile, 3 * scale_tile + 4,
                     size_t{20480 + 333}}) {
      const std::vector<float> x = gaussian(n, static_cast<uint32_t>(n + scale_tile));
      const std::vector<float> e = gaussian(n, static_cast<uint32_t>(n + scale_tile) + 1, 0.3f);
      for (float s : kSparsities) {
        check_identity_one_format(f32(x), &e, s, "gaussian", 0, scale_tile);
        check_identity_one_format(f32(x), nullptr, s, "gaussian e=null", 0, scale_tile);
      }
    }
  }
}

TEST(SimdIdentity, AllZero) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{20480}, size_t{20481}, size_t{100000}}) {
    const std::vector<float> x(n, 0.0f);
    std::vector<float> e(n, 0.0f);
    for (size_t i = 0; i < n; i += 3) e[i] = -0.0f;
    check_identity(f32(x), &e, 1.0f, "zeros");
    check_identity(f32(x), nullptr, 1.99f, "zeros e=null");
    std::vector<float> neg(n, -0.0f);
    check_identity(f32(neg), &e, 1.5f, "negative zeros");
  }
}

TEST(SimdIdentity, OneNonZero) {
  for (size_t n : {size_t{5}, size_t{20480}, size_t{3 * 20480 + 12345}}) {
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      std::vector<float> x(n, 0.0f);
      x[at] = -2.5f;
      check_identity(f32(x), nullptr, 1.0f, "one non-zero at " + std::to_string(at));
      std::vector<float> e(n, 0.0f);
      check_identity(f32(x), &e, 1.99f, "one non-zero with e at " + std::to_string(at));
    }
  }
}

TEST(SimdIdentity, EqualMagnitudesMixedSigns) {
  for (size_t n : {size_t{6}, size_t{20479}, size_t{20480}, size_t{41000}}) {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = (i * 2654435761u) % 3 == 0 ? -0.75f : 0.75f;
    std::vector<float> e(n, 0.0f);
    for (float s : kSparsities) check_identity(f32(x), &e, s, "equal magnitudes");
    for (size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? 1.0f : -1.0f;
    check_identity(f32(x), nullptr, 1.0f, "alternating signs");
  }
}

// Values exactly at +-h (and one ulp either side), where > and < decide.
TEST(SimdIdentity, TiesAtThreshold) {
  for (size_t n : {size_t{9}, size_t{20480}, size_t{20480 + 333}}) {
    std::vector<float> x(n);
    const float h = 0.5f;  // M = 1, s = 1
    const float cases[] = {h,
                           -h,
                           std::nextafter(h, 1.0f),
                           std::nextafter(h, 0.0f),
                           -std::nextafter(h, 1.0f),
                           -std::nextafter(h, 0.0f),
                           0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f};
    for (size_t i = 0; i < n; ++i) x[i] = cases[(i * 7) % std::size(cases)];
    x[n / 3] = 1.0f;
    check_identity(f32(x), nullptr, 1.0f, "ties");
    std::vector<float> e(n, 0.0f);
    check_identity(f32(x), &e, 1.0f, "ties with e");
    // a = x + e lands on the ties after the addition.
    for (size_t i = 0; i < n; ++i) e[i] = i % 2 == 0 ? 0.25f : -0.25f;
    std::vector<float> y(n);
    for (size_t i = 0; i < n; ++i) y[i] = x[i] - e[i];
    check_identity(f32(y), &e, 1.0f, "ties via x + e");
  }
}

TEST(SimdIdentity, Denormals) {
  for (size_t n : {size_t{17}, size_t{20480}, size_t{30001}}) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::vector<float> x(n), e(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = float_of((rng() & 0x007FFFFFu) | (rng() & 0x80000000u));  // denormal or +-0
      e[i] = float_of((rng() & 0x000FFFFFu) | (rng() & 0x80000000u));
    }
    for (float s : kSparsities) {
      check_identity(f32(x), &e, s, "denormals");
      check_identity(f32(x), nullptr, s, "denormals e=null");
    }
  }
}

// Non-finite a: the block goes raw and the error buffer is left as it was.
TEST(SimdIdentity, NanAndInfGiveRawBlocks) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            float_of(0x7F800001u),  // signalling NaN
                            float_of(0x7FC12345u),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (size_t n : {size_t{1}, size_t{20}, size_t{20480}, size_t{3 * 20480 + 12345}}) {
    for (float special : specials) {
      for (size_t at : {size_t{0}, n - 1, n / 2}) {
        std::vector<float> x = gaussian(n, 3);
        x[at] = special;
        const std::vector<float> e = gaussian(n, 4, 0.1f);
        check_identity(f32(x), &e, 1.0f, "special in x");
        check_identity(f32(x), nullptr, 1.0f, "special in x, e=null");
        for (Isa isa : isas_under_test()) {
          const Encoded got = encode_with(isa, f32(x), &e, 1.0f);
          EXPECT_EQ(got.result.format, Format::kRaw) << name(isa);
          EXPECT_SAME_FLOATS(got.error.data(), e.data(), n, "error untouched " << name(isa));
        }
        // The non-finite value may also come from the error buffer, or from x + e overflowing.
        std::vector<float> x2 = gaussian(n, 5);
        std::vector<float> e2 = gaussian(n, 6, 0.1f);
        e2[at] = special;
        check_identity(f32(x2), &e2, 1.5f, "special in e");
        x2[at] = 3.0e38f;
        e2[at] = 3.0e38f;
        check_identity(f32(x2), &e2, 1.0f, "x + e overflows");
      }
    }
  }
}

// M finite but M * s overflows to Inf: raw block, error untouched.
TEST(SimdIdentity, ScaleOverflow) {
  for (size_t n : {size_t{3}, size_t{20481}}) {
    std::vector<float> x = gaussian(n, 8);
    x[n / 2] = 3.0e38f;
    std::vector<float> e(n, 0.0f);
    check_identity(f32(x), &e, 1.9f, "scale overflows");
    check_identity(f32(x), &e, 1.0f, "large but finite scale");
    for (Isa isa : isas_under_test()) {
      const Encoded got = encode_with(isa, f32(x), &e, 1.9f);
      EXPECT_EQ(got.result.format, Format::kRaw) << name(isa);
    }
  }
}

// Heavy tails and sparse spikes: long zero runs of every length around the 14 and 64 limits.
TEST(SimdIdentity, SparseSpikes) {
  std::mt19937 rng(42);
  for (size_t n : {size_t{20480}, size_t{3 * 20480 + 12345}}) {
    for (double density : {0.0005, 0.003, 0.02, 0.2}) {
      std::vector<float> x(n, 0.0f);
      std::bernoulli_distribution spike(density);
      std::normal_distribution<float> small(0.0f, 0.01f);
      for (size_t i = 0; i < n; ++i) x[i] = spike(rng) ? (rng() % 2 ? 1.0f : -1.0f) : small(rng);
      for (float s : kSparsities) check_identity(f32(x), nullptr, s, "spikes");
    }
  }
}

TEST(SimdIdentity, HalfAndBFloat16Input) {
  for (size_t n : {size_t{1}, size_t{21}, size_t{20480}, size_t{3 * 20480 + 12345}}) {
    const std::vector<float> g = gaussian(n, 9);
    std::vector<uint16_t> bf(n), half(n);
    for (size_t i = 0; i < n; ++i) {
      bf[i] = static_cast<uint16_t>(bits_of(g[i]) >> 16);
      // A finite half: sign, exponent 0..30, mantissa (exponent 0: subnormals and zero).
      const uint32_t h = static_cast<uint32_t>(i * 2654435761u);
      half[i] = static_cast<uint16_t>((h & 0x8000u) | ((h >> 3) % 31) << 10 | (h & 0x3FFu));
    }
    const std::vector<float> e = gaussian(n, 10, 0.01f);
    for (float s : kSparsities) {
      check_identity(Values{bf.data(), DType::kBFloat16, n}, &e, s, "bf16");
      check_identity(Values{half.data(), DType::kFloat16, n}, &e, s, "fp16");
      check_identity(Values{half.data(), DType::kFloat16, n}, nullptr, s, "fp16 e=null");
    }
    if (n > 2) {
      half[n / 2] = 0x7C00;  // +Inf
      check_identity(Values{half.data(), DType::kFloat16, n}, &e, 1.0f, "fp16 inf");
      bf[n - 1] = 0x7FC1;  // NaN
      check_identity(Values{bf.data(), DType::kBFloat16, n}, &e, 1.0f, "bf16 nan");
    }
  }
}

}  // namespace
}  // namespace threelc::compression::simd_identity
