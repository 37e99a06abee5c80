// The SIMD kernels one by one (kernels.h) against the scalar reference, so that a mismatch
// names the kernel: zero-run encode and expand, unpack and unpack-add, quantize on tiles of
// every shape, abs-max bits and raw add.
#include <gtest/gtest.h>

#include "simd_identity.h"

namespace threelc::compression::simd_identity {
namespace {

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

}  // namespace
}  // namespace threelc::compression::simd_identity
