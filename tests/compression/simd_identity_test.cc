// Every SIMD kernel set must be bit-identical to the scalar reference (kernels_reference.h):
// identical blocks, identical error buffers, identical decoded floats, for every ISA this CPU
// runs (supported_isas()), on random inputs of many sizes and on adversarial ones (zeros,
// ties at +-h, denormals, NaN/Inf, a scale that overflows, e == nullptr, fp16/bf16 input),
// each in format v1 and in format v2 (a scale per tile) with several scale tiles.
// Tests the kernels one by one as well (kernels.h), so a mismatch names the kernel, and the
// fp16 array conversions (float16_arrays.h) against float16.h's one-value functions.
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

namespace threelc::compression {
namespace {

using test_support::bits_of;
using test_support::Bytes;
using test_support::float_of;

// ISAs other than the reference that this CPU runs, plus kAuto (whatever dispatch picks,
// THREELC_CODEC_ISA included).
std::vector<Isa> isas_under_test() {
  std::vector<Isa> isas;
  for (Isa isa : supported_isas()) {
    if (isa != Isa::kScalar) isas.push_back(isa);
  }
  isas.push_back(Isa::kAuto);
  return isas;
}

std::string name(Isa isa) { return std::string(isa_name(isa)); }

// First index where two float arrays differ bitwise, or -1.
long first_float_mismatch(const float* a, const float* b, size_t n) {
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

long first_byte_mismatch(const Bytes& a, const Bytes& b) {
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
Encoded encode_with(Isa isa, const Values& values, const std::vector<float>* error, float s,
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
void check_identity_one_format(const Values& values, const std::vector<float>* error, float s,
                               const std::string& label, size_t error_offset, size_t scale_tile) {
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
const size_t kScaleTiles[] = {0, 5, 1280, 20480};

void check_identity(const Values& values, const std::vector<float>* error, float s,
                    const std::string& label, size_t error_offset = 0) {
  for (size_t scale_tile : kScaleTiles) {
    if (scale_tile != 0 && values.count <= scale_tile) continue;
    check_identity_one_format(values, error, s, label, error_offset, scale_tile);
  }
}

Values f32(const std::vector<float>& x) { return Values{x.data(), DType::kFloat32, x.size()}; }

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

const size_t kSizes[] = {0,     1,     2,     3,     4,     5,     6,
                         7,     8,     9,     15,    16,    17,    31,
                         33,    63,    64,    65,    79,    80,    81,
                         159,   161,   319,   321,   1000,  4095,  4096,
                         4097,  5119,  5121,  16383, 20475, 20476, 20479,
                         20480, 20481, 20485, 20496, 40960, 40961, 3 * 20480 + 12345};
const float kSparsities[] = {1.0f, 1.5f, 1.99f};

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

// ---- the kernels one by one ----------------------------------------------------------------

std::vector<const detail::Kernels*> simd_kernels() {
  std::vector<const detail::Kernels*> sets;
  for (Isa isa : supported_isas()) {
    if (isa != Isa::kScalar) sets.push_back(&detail::kernels_for(isa));
  }
  return sets;
}

// Group patterns: runs of 121 of every length 0..200 between literal runs of 1..70 bytes,
// and random mixes, for g from 1 to 4096.
std::vector<Bytes> group_patterns() {
  std::vector<Bytes> patterns;
  std::mt19937 rng(7);
  for (size_t g : {size_t{1}, size_t{2}, size_t{13}, size_t{14}, size_t{15}, size_t{31}, size_t{32},
                   size_t{33}, size_t{63}, size_t{64}, size_t{65}, size_t{100}, size_t{127},
                   size_t{128}, size_t{129}, size_t{1000}, size_t{4095}, size_t{4096}}) {
    patterns.emplace_back(g, kZeroGroup);  // all zero
    Bytes literal(g);
    for (auto& b : literal) b = static_cast<uint8_t>(rng() % 242 + (rng() % 2));  // 0..242
    for (auto& b : literal)
      if (b == kZeroGroup) b = 0;
    patterns.push_back(literal);
    for (double p_zero : {0.3, 0.9, 0.99}) {
      Bytes mix(g);
      std::bernoulli_distribution zero(p_zero);
      for (auto& b : mix) b = zero(rng) ? kZeroGroup : static_cast<uint8_t>(rng() % 243);
      patterns.push_back(mix);
    }
    Bytes runs(g);
    size_t j = 0;
    while (j < g) {
      const size_t zeros = rng() % 201;
      for (size_t r = 0; r < zeros && j < g; ++r) runs[j++] = kZeroGroup;
      const size_t lits = 1 + rng() % 70;
      for (size_t r = 0; r < lits && j < g; ++r) runs[j++] = static_cast<uint8_t>(rng() % 121);
    }
    patterns.push_back(runs);
  }
  // Every run length 1..300 at every phase relative to a 64-byte chunk.
  for (size_t run = 1; run <= 300; run += (run < 70 ? 1 : 13)) {
    for (size_t phase = 0; phase < 64; phase += 5) {
      Bytes b(4096, 7);
      for (size_t j = phase; j + run + 1 < b.size(); j += run + 1 + phase % 3) {
        for (size_t r = 0; r < run; ++r) b[j + r] = kZeroGroup;
      }
      patterns.push_back(b);
    }
  }
  return patterns;
}

TEST(SimdKernels, ZeroRunEncodeAndExpand) {
  const detail::Kernels& ref = detail::scalar_kernels();
  for (const Bytes& groups : group_patterns()) {
    const size_t g = groups.size();
    Bytes want(g, 0xEE);
    const size_t want_len = ref.zero_run_encode(groups.data(), g, want.data());
    ASSERT_LE(want_len, g);
    want.resize(want_len);
    for (const detail::Kernels* k : simd_kernels()) {
      SCOPED_TRACE(std::string(k->name) + " g=" + std::to_string(g));
      // Exactly g bytes of output space, and an exactly sized input, on the heap so that
      // sanitizers see overruns.
      const std::vector<uint8_t> in(groups);
      Bytes got(g, 0xEE);
      const size_t len = k->zero_run_encode(in.data(), g, got.data());
      ASSERT_EQ(len, want_len);
      got.resize(len);
      EXPECT_EQ(got, want);

      Bytes expanded(g, 0xEE);
      k->zero_run_expand(want.data(), want.size(), g, expanded.data());
      EXPECT_EQ(expanded, groups);
    }
  }
}

// Random group bytes (all 243 values) through unpack_tile and unpack_tile_add, for every
// tile size shape, at misaligned destinations.
TEST(SimdKernels, UnpackAndUnpackAdd) {
  const detail::Kernels& ref = detail::scalar_kernels();
  std::mt19937 rng(99);
  for (size_t values : {size_t{1}, size_t{4}, size_t{5}, size_t{6}, size_t{39}, size_t{40},
                        size_t{41}, size_t{80}, size_t{81}, size_t{319}, size_t{320}, size_t{321},
                        size_t{4999}, size_t{20476}, size_t{20479}, size_t{20480}}) {
    const size_t g = tile_groups(values);
    for (double p_zero : {0.0, 0.9, 0.999}) {
      Bytes groups(g);
      std::bernoulli_distribution zero(p_zero);
      for (auto& b : groups) b = zero(rng) ? kZeroGroup : static_cast<uint8_t>(rng() % 243);
      for (float scale : {0.0f, 1.0f, 3.5e-3f, float_of(0x00000001u)}) {
        for (size_t offset : {0, 1, 3}) {
          std::vector<float> base(values + offset);
          for (size_t i = 0; i < base.size(); ++i) {
            base[i] = i % 5 == 0 ? -0.0f
                                 : static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 7.0f;
          }
          std::vector<float> want = base, want_add = base;
          ref.unpack_tile(groups.data(), values, g, scale, want.data() + offset);
          ref.unpack_tile_add(groups.data(), values, g, scale * 0.5f, want_add.data() + offset);
          for (const detail::Kernels* k : simd_kernels()) {
            SCOPED_TRACE(std::string(k->name) + " values=" + std::to_string(values) +
                         " offset=" + std::to_string(offset));
            std::vector<float> got = base, got_add = base;
            k->unpack_tile(groups.data(), values, g, scale, got.data() + offset);
            k->unpack_tile_add(groups.data(), values, g, scale * 0.5f, got_add.data() + offset);
            EXPECT_SAME_FLOATS(got.data(), want.data(), got.size(), "unpack_tile");
            EXPECT_SAME_FLOATS(got_add.data(), want_add.data(), got.size(), "unpack_tile_add");
          }
        }
      }
    }
  }
}

TEST(SimdKernels, QuantizeTileShapes) {
  const detail::Kernels& ref = detail::scalar_kernels();
  for (size_t values : {size_t{1}, size_t{5}, size_t{79}, size_t{80}, size_t{81}, size_t{161},
                        size_t{4999}, size_t{20476}, size_t{20480}}) {
    const size_t g = tile_groups(values);
    const std::vector<float> x = gaussian(values, static_cast<uint32_t>(values));
    const std::vector<float> e0 = gaussian(values, static_cast<uint32_t>(values) + 1, 0.5f);
    const float scale = 2.25f, h = 0.5f * scale;
    Bytes want(g, 0xEE);
    std::vector<float> want_e = e0;
    ref.quantize_tile(x.data(), want_e.data(), values, g, scale, h, want.data());
    Bytes want_null(g, 0xEE);
    ref.quantize_tile(x.data(), nullptr, values, g, scale, h, want_null.data());
    for (const detail::Kernels* k : simd_kernels()) {
      SCOPED_TRACE(std::string(k->name) + " values=" + std::to_string(values));
      Bytes got(g, 0xEE);
      std::vector<float> got_e = e0;
      k->quantize_tile(x.data(), got_e.data(), values, g, scale, h, got.data());
      EXPECT_EQ(got, want);
      EXPECT_SAME_FLOATS(got_e.data(), want_e.data(), values, "error");
      Bytes got_null(g, 0xEE);
      k->quantize_tile(x.data(), nullptr, values, g, scale, h, got_null.data());
      EXPECT_EQ(got_null, want_null);
    }
  }
}

TEST(SimdKernels, AbsMaxBitsAndRawAdd) {
  const detail::Kernels& ref = detail::scalar_kernels();
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{63}, size_t{64},
                   size_t{65}, size_t{1000}, size_t{100003}}) {
    std::vector<float> x = gaussian(n, static_cast<uint32_t>(n) + 3);
    const std::vector<float> e = gaussian(n, static_cast<uint32_t>(n) + 4);
    if (n > 10) x[n - 1] = -1.0e30f;  // the maximum in the tail
    Bytes src(4 * n + 1);
    if (n != 0) std::memcpy(src.data() + 1, x.data(), 4 * n);  // misaligned raw payload
    std::vector<float> want(n, 1.5f), dst_base(n, 1.5f);
    for (size_t i = 0; i < n; i += 4) dst_base[i] = want[i] = -0.0f;
    ref.raw_add(src.data() + 1, n, -0.75f, want.data());
    for (const detail::Kernels* k : simd_kernels()) {
      SCOPED_TRACE(std::string(k->name) + " n=" + std::to_string(n));
      EXPECT_EQ(k->abs_max_bits(x.data(), e.data(), n), ref.abs_max_bits(x.data(), e.data(), n));
      EXPECT_EQ(k->abs_max_bits(x.data(), nullptr, n), ref.abs_max_bits(x.data(), nullptr, n));
      std::vector<float> got = dst_base;
      k->raw_add(src.data() + 1, n, -0.75f, got.data());
      EXPECT_SAME_FLOATS(got.data(), want.data(), n, "raw_add");
    }
  }
}

// Every half, in an array whose length is not a multiple of the 8 lanes (the tail is converted
// one value at a time): the same bits as half_to_float, signalling NaNs included.
TEST(Float16Arrays, WideningGivesTheBitsOfHalfToFloat) {
  std::vector<uint16_t> halves(65536 + 5);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i * 40503u);
  for (size_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> expected(halves.size());
  for (size_t i = 0; i < halves.size(); ++i) expected[i] = half_to_float(halves[i]);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAuto}) {
    if (!isa_supported(isa)) continue;
    std::vector<float> got(halves.size());
    halves_to_floats(halves.data(), got.data(), halves.size(), isa);
    EXPECT_SAME_FLOATS(got.data(), expected.data(), halves.size(), name(isa));
  }
}

// Narrowing: every half's value, the ties between neighbouring halves and the floats beside
// them, every NaN payload class, and a sweep of bit patterns: the bits of float_to_half.
TEST(Float16Arrays, NarrowingGivesTheBitsOfFloatToHalf) {
  std::vector<float> floats;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float value = half_to_float(static_cast<uint16_t>(h));
    floats.push_back(value);
    if ((h & 0x7FFFu) < 0x7C00u) {  // finite: the tie with the next half away from zero
      const float next = half_to_float(static_cast<uint16_t>(h + 1));
      const float mid = static_cast<float>((static_cast<double>(value) + next) / 2);
      floats.insert(floats.end(), {mid, std::nextafter(mid, value), std::nextafter(mid, next)});
    }
  }
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521) {
    floats.push_back(float_of(static_cast<uint32_t>(b)));
  }
  floats.push_back(float_of(0x7F800001u));  // signalling NaNs
  floats.push_back(float_of(0xFFBFFFFFu));
  std::vector<uint16_t> expected(floats.size());
  for (size_t i = 0; i < floats.size(); ++i) expected[i] = float_to_half(floats[i]);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAuto}) {
    if (!isa_supported(isa)) continue;
    std::vector<uint16_t> got(floats.size());
    floats_to_halves(floats.data(), got.data(), floats.size(), isa);
    for (size_t i = 0; i < floats.size(); ++i) {
      ASSERT_EQ(got[i], expected[i])
          << name(isa) << ": float bits " << std::hex << bits_of(floats[i]);
    }
  }
}

}  // namespace
}  // namespace threelc::compression
