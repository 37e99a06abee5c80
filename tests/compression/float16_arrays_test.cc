// The fp16 array conversions (float16_arrays.h, F16C where the ISA allows) against float16.h's
// one-value functions: the same bits both ways, NaNs included.
#include <gtest/gtest.h>

#include "simd_identity.h"

namespace threelc::compression::simd_identity {
namespace {

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
}  // namespace threelc::compression::simd_identity
