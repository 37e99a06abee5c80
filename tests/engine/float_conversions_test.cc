// The element types' table and the fp16 / bf16 conversions of collectives/reduce_ops.h
// (exhaustively where that is cheap): widening, narrowing to nearest even, NaN and the edges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "collectives/observer.h"
#include "collectives/reduce_ops.h"
#include "element_type.h"
#include "float_bits.h"

namespace te = threelc::engine;
using te::ElementType;
using te::ReduceOp;

TEST(ElementType, NamesOfTypesAndOps) {
  EXPECT_STREQ(te::element_type_name(ElementType::kUint8), "uint8");
  EXPECT_STREQ(te::element_type_name(ElementType::kBFloat16), "bfloat16");
  EXPECT_STREQ(te::element_type_name(ElementType::kFloat64), "float64");
  EXPECT_STREQ(te::element_type_name(ElementType::kInt16), "int16");
  EXPECT_EQ(te::element_size(ElementType::kInt16), 2u);
  EXPECT_FALSE(te::is_floating(ElementType::kInt16));
  EXPECT_EQ(static_cast<int>(ElementType::kInt16), THREELC_INT16);
  EXPECT_STREQ(te::element_type_name(ElementType::kBool), "bool");
  EXPECT_EQ(te::element_size(ElementType::kBool), 1u);
  EXPECT_FALSE(te::is_floating(ElementType::kBool));
  EXPECT_EQ(static_cast<int>(ElementType::kBool), THREELC_BOOL);
  EXPECT_STREQ(te::reduce_op_name(ReduceOp::kAverage), "average");
  EXPECT_STREQ(te::reduce_op_name(ReduceOp::kProduct), "product");
  EXPECT_STREQ(te::phase_name(te::Phase::kReduce), "reduce");
  EXPECT_STREQ(te::phase_name(te::Phase::kDecompress), "decompress");
}

TEST(Float16, WideningMatchesTheDefinitionForEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto v = static_cast<uint16_t>(h);
    if ((v & 0x7C00u) == 0x7C00u) continue;
    ASSERT_EQ(static_cast<double>(te::half_to_float(v)), half_value(v)) << std::hex << h;
  }
  EXPECT_EQ(te::half_to_float(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(te::half_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(te::half_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(te::half_to_float(0xFC01)));
  EXPECT_EQ(bits(te::half_to_float(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(Float16, EveryValueRoundTripsAndNaNStaysNaN) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto v = static_cast<uint16_t>(h);
    const uint16_t back = te::float_to_half(te::half_to_float(v));
    if (half_is_nan(v)) {
      ASSERT_TRUE(half_is_nan(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8000u, v & 0x8000u) << std::hex << h;
      if ((v & 0x200u) != 0) {
        ASSERT_EQ(back, v) << std::hex << h;  // quiet NaNs keep their payload
      }
    } else {
      ASSERT_EQ(back, v) << std::hex << h;
    }
  }
}

// Between every two neighbouring finite halves: the midpoint goes to the even one, anything a
// float ulp off the midpoint to the nearer one (both signs; the step to inf is an edge case).
TEST(Float16, NarrowingRoundsToNearestEvenEverywhere) {
  for (uint32_t h = 0; h < 0x7BFFu; ++h) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const auto lo = static_cast<uint16_t>(h | sign);
      const auto hi = static_cast<uint16_t>((h + 1) | sign);
      const float a = te::half_to_float(lo);
      const float b = te::half_to_float(hi);
      const auto mid = static_cast<float>((static_cast<double>(a) + static_cast<double>(b)) / 2);
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + static_cast<double>(b)) / 2);
      ASSERT_EQ(te::float_to_half(mid), (h & 1u) == 0 ? lo : hi) << std::hex << h;
      ASSERT_EQ(te::float_to_half(std::nextafter(mid, a)), lo) << std::hex << h;
      ASSERT_EQ(te::float_to_half(std::nextafter(mid, b)), hi) << std::hex << h;
    }
  }
}

TEST(Float16, NarrowingEdgeCases) {
  EXPECT_EQ(te::float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(te::float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(te::float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(te::float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(te::float_to_half(65519.996f), 0x7BFF);
  EXPECT_EQ(te::float_to_half(65520.0f), 0x7C00);  // the tie above the largest half: to inf
  EXPECT_EQ(te::float_to_half(1e10f), 0x7C00);
  EXPECT_EQ(te::float_to_half(-1e10f), 0xFC00);
  EXPECT_EQ(te::float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(te::float_to_half(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_TRUE(half_is_nan(te::float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(te::float_to_half(from_bits(0x7F800001u))));  // payload only low bits
  EXPECT_TRUE(half_is_nan(te::float_to_half(from_bits(0xFF800001u))));
  EXPECT_EQ(te::float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(te::float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie: to even zero
  EXPECT_EQ(te::float_to_half(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(te::float_to_half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(te::float_to_half(std::ldexp(1.5f, -24)), 0x0002);     // tie: 1 -> 2
  EXPECT_EQ(te::float_to_half(std::ldexp(2.5f, -24)), 0x0002);     // tie: 3 -> 2
  EXPECT_EQ(te::float_to_half(std::ldexp(1023.5f, -24)), 0x0400);  // into the normals
  EXPECT_EQ(te::float_to_half(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(te::float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(te::float_to_half(std::numeric_limits<float>::min()), 0x0000);
  EXPECT_EQ(te::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(te::float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
}

TEST(BFloat16, EveryValueRoundTripsAndNaNStaysNaN) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const auto v = static_cast<uint16_t>(b);
    const float f = te::bfloat16_to_float(v);
    EXPECT_EQ(bits(f), b << 16);
    const uint16_t back = te::float_to_bfloat16(f);
    if (bf16_is_nan(v)) {
      ASSERT_TRUE(bf16_is_nan(back)) << std::hex << b;
      if ((v & 0x40u) != 0) {
        ASSERT_EQ(back, v) << std::hex << b;
      }
    } else {
      ASSERT_EQ(back, v) << std::hex << b;
    }
  }
}

TEST(BFloat16, NarrowingRoundsToNearestEvenEverywhere) {
  for (uint32_t b = 0; b < 0x7F80u; ++b) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const auto lo = static_cast<uint16_t>(b | sign);
      const auto hi = static_cast<uint16_t>((b + 1) | sign);
      const uint32_t mid_bits = (static_cast<uint32_t>(lo) << 16) | 0x8000u;  // exact midpoint
      ASSERT_EQ(te::float_to_bfloat16(from_bits(mid_bits)), (b & 1u) == 0 ? lo : hi);
      ASSERT_EQ(te::float_to_bfloat16(from_bits(mid_bits - 1)), lo);
      ASSERT_EQ(te::float_to_bfloat16(from_bits(mid_bits + 1)), hi);
    }
  }
  EXPECT_EQ(te::float_to_bfloat16(std::numeric_limits<float>::max()), 0x7F80);  // to inf
  EXPECT_EQ(te::float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(te::float_to_bfloat16(from_bits(0x00008000u)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(te::float_to_bfloat16(from_bits(0x00018000u)), 0x0002);
  EXPECT_TRUE(bf16_is_nan(te::float_to_bfloat16(from_bits(0x7F800001u))));
  EXPECT_EQ(te::float_to_bfloat16(1.0f), 0x3F80);
}

TEST(Conversions, ToAndFromFloat32ForEveryFloatType) {
  const std::vector<float> in = {1.0f, -0.5f, 65504.0f, 1e-7f, 3.14159f};
  std::vector<float> back(in.size());
  for (const auto type : {ElementType::kFloat16, ElementType::kBFloat16, ElementType::kFloat32,
                          ElementType::kFloat64}) {
    std::vector<std::byte> stored(in.size() * te::element_size(type) + 1);
    te::from_float32(type, in.data(), stored.data() + 1, in.size());  // unaligned on purpose
    te::to_float32(type, stored.data() + 1, back.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      float want = in[i];
      if (type == ElementType::kFloat16) want = te::half_to_float(te::float_to_half(in[i]));
      if (type == ElementType::kBFloat16)
        want = te::bfloat16_to_float(te::float_to_bfloat16(in[i]));
      EXPECT_EQ(back[i], want) << te::element_type_name(type) << " " << i;
    }
  }
  const double d[] = {0.1, 1e300, -1e-300};
  float f[3];
  te::to_float32(ElementType::kFloat64, d, f, 3);
  EXPECT_EQ(f[0], static_cast<float>(0.1));
  EXPECT_EQ(f[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits(f[2]), 0x80000000u);
  int32_t i32 = 0;
  EXPECT_THROW(te::to_float32(ElementType::kInt32, &i32, f, 1), std::invalid_argument);
  EXPECT_THROW(te::to_float32(ElementType::kInt16, &i32, f, 1), std::invalid_argument);
  EXPECT_THROW(te::from_float32(ElementType::kUint8, f, &i32, 1), std::invalid_argument);
}
