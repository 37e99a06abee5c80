// The elementwise kernels of the uncompressed collectives (collectives/reduce_ops.h): every
// element type and op, the identities, scaling with saturation and averaging (the conversions:
// float_conversions_test.cc).
#include "collectives/reduce_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "element_type.h"
#include "float_bits.h"

namespace te = threelc::engine;
using te::ElementType;
using te::ReduceOp;

namespace {

// a and b hold the same values of `type` (floats compared as values: -0 == +0, NaN == NaN).
bool same_values(ElementType type, const std::byte* a, const std::byte* b, size_t count) {
  if (!te::is_floating(type)) return std::memcmp(a, b, count * te::element_size(type)) == 0;
  for (size_t i = 0; i < count; ++i) {
    double x = 0;
    double y = 0;
    if (type == ElementType::kFloat64) {
      std::memcpy(&x, a + i * 8, 8);
      std::memcpy(&y, b + i * 8, 8);
    } else {
      const size_t es = te::element_size(type);
      float fx = 0;
      float fy = 0;
      te::to_float32(type, a + i * es, &fx, 1);
      te::to_float32(type, b + i * es, &fy, 1);
      x = fx;
      y = fy;
    }
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
  }
  return true;
}

// Applies one op to two values of T stored in byte buffers and returns the result.
template <typename T>
T reduce_one(ElementType type, ReduceOp op, T a, T b) {
  te::reduce_into(type, op, &a, &b, 1);
  return a;
}

TEST(ReduceInto, IntegersWrapLikeUnsignedArithmetic) {
  EXPECT_EQ(reduce_one<uint8_t>(ElementType::kUint8, ReduceOp::kSum, 200, 100), 44);
  EXPECT_EQ(reduce_one<uint8_t>(ElementType::kUint8, ReduceOp::kProduct, 16, 17), 16);
  EXPECT_EQ(reduce_one<uint8_t>(ElementType::kUint8, ReduceOp::kProduct, 255, 255), 1);
  EXPECT_EQ(reduce_one<int8_t>(ElementType::kInt8, ReduceOp::kSum, 100, 100), -56);
  EXPECT_EQ(reduce_one<int8_t>(ElementType::kInt8, ReduceOp::kProduct, -128, -1), -128);
  EXPECT_EQ(reduce_one<int32_t>(ElementType::kInt32, ReduceOp::kSum,
                                std::numeric_limits<int32_t>::max(), 1),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(reduce_one<int32_t>(ElementType::kInt32, ReduceOp::kProduct, 65536, 65536), 0);
  EXPECT_EQ(reduce_one<int32_t>(ElementType::kInt32, ReduceOp::kProduct, -3, 7), -21);
  EXPECT_EQ(reduce_one<int64_t>(ElementType::kInt64, ReduceOp::kSum,
                                std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(reduce_one<int64_t>(ElementType::kInt64, ReduceOp::kProduct,
                                std::numeric_limits<int64_t>::max(), 2),
            -2);
  EXPECT_EQ(reduce_one<int64_t>(ElementType::kInt64, ReduceOp::kAverage, -5, 3), -2);
}

TEST(ReduceInto, IntegerMinMaxAreSigned) {
  EXPECT_EQ(reduce_one<uint8_t>(ElementType::kUint8, ReduceOp::kMin, 200, 100), 100);
  EXPECT_EQ(reduce_one<uint8_t>(ElementType::kUint8, ReduceOp::kMax, 200, 100), 200);
  EXPECT_EQ(reduce_one<int8_t>(ElementType::kInt8, ReduceOp::kMin, -100, 100), -100);
  EXPECT_EQ(reduce_one<int8_t>(ElementType::kInt8, ReduceOp::kMax, -100, 100), 100);
  EXPECT_EQ(reduce_one<int32_t>(ElementType::kInt32, ReduceOp::kMin, -1, 0), -1);
  EXPECT_EQ(reduce_one<int64_t>(ElementType::kInt64, ReduceOp::kMax,
                                std::numeric_limits<int64_t>::min(), -1),
            -1);
}

// int16 in every op: 16-bit wrapping (its operands must not overflow int on the way: 65535 *
// 65535 as unsigned), signed min / max, truncating average, saturating scales.
TEST(ReduceInto, Int16EveryOpWithScaling) {
  constexpr int16_t kMax = std::numeric_limits<int16_t>::max();
  constexpr int16_t kMin = std::numeric_limits<int16_t>::min();
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kSum, 1000, -3000), -2000);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kSum, kMax, 1), kMin);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kSum, 300, 300), 600);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kAverage, 20000, 20000),
            -25536);  // the sum wraps; the caller divides
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kProduct, 300, 300),
            24464);  // 90000 mod 65536
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kProduct, -1, -1), 1);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kProduct, kMin, -1), kMin);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kProduct, -7, 9), -63);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kMin, -300, 200), -300);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kMax, -300, 200), 200);
  EXPECT_EQ(reduce_one<int16_t>(ElementType::kInt16, ReduceOp::kMax, kMin, -1), -1);

  int16_t id[4] = {5, 5, 5, 5};
  te::fill_identity(ElementType::kInt16, ReduceOp::kMin, id, 1);
  te::fill_identity(ElementType::kInt16, ReduceOp::kMax, id + 1, 1);
  te::fill_identity(ElementType::kInt16, ReduceOp::kProduct, id + 2, 1);
  te::fill_identity(ElementType::kInt16, ReduceOp::kAverage, id + 3, 1);
  EXPECT_EQ(id[0], kMax);
  EXPECT_EQ(id[1], kMin);
  EXPECT_EQ(id[2], 1);
  EXPECT_EQ(id[3], 0);

  int16_t avg[4] = {-7, 7, 9, kMin};
  te::divide_values(ElementType::kInt16, avg, 3, 2);
  EXPECT_EQ(avg[0], -3);  // toward zero
  EXPECT_EQ(avg[1], 3);
  EXPECT_EQ(avg[2], 4);
  te::divide_values(ElementType::kInt16, avg + 3, 1, -1);
  EXPECT_EQ(avg[3], kMin);  // -kMin does not fit: wraps to itself

  int16_t scaled[5] = {20000, -20000, 1001, -1001, 300};
  te::scale_values(ElementType::kInt16, scaled, 4, 2.0);
  EXPECT_EQ(scaled[0], kMax);  // saturated, not wrapped
  EXPECT_EQ(scaled[1], kMin);
  EXPECT_EQ(scaled[2], 2002);
  EXPECT_EQ(scaled[3], -2002);
  te::scale_values(ElementType::kInt16, scaled + 2, 2, 0.25);
  EXPECT_EQ(scaled[2], 500);  // 500.5 toward zero
  EXPECT_EQ(scaled[3], -500);
  te::scale_values(ElementType::kInt16, scaled + 4, 1, std::nan(""));
  EXPECT_EQ(scaled[4], 0);

  // An allreduce's steps as the engine runs them for Average with prescale 2, postscale 3 over
  // three ranks: scale each input, reduce, divide by the ranks, scale the result.
  int16_t acc[2] = {1000, -1234};
  const int16_t ranks[2][2] = {{-50, 4000}, {7, -2}};
  te::scale_values(ElementType::kInt16, acc, 2, 2.0);
  for (const auto& r : ranks) {
    int16_t in[2] = {r[0], r[1]};
    te::scale_values(ElementType::kInt16, in, 2, 2.0);
    te::reduce_into(ElementType::kInt16, ReduceOp::kAverage, acc, in, 2);
  }
  te::divide_values(ElementType::kInt16, acc, 2, 3);
  te::scale_values(ElementType::kInt16, acc, 2, 3.0);
  EXPECT_EQ(acc[0], (2 * (1000 - 50 + 7) / 3) * 3);     // 1914 / 3 = 638, * 3
  EXPECT_EQ(acc[1], (2 * (-1234 + 4000 - 2) / 3) * 3);  // 5528 / 3 = 1842, * 3
}

TEST(ReduceInto, FloatsIncludingNaNAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(reduce_one<float>(ElementType::kFloat32, ReduceOp::kSum, 1.5f, 2.25f), 3.75f);
  EXPECT_EQ(reduce_one<float>(ElementType::kFloat32, ReduceOp::kAverage, 1.5f, 2.25f), 3.75f);
  EXPECT_EQ(reduce_one<float>(ElementType::kFloat32, ReduceOp::kProduct, 1.5f, -4.0f), -6.0f);
  EXPECT_EQ(reduce_one<float>(ElementType::kFloat32, ReduceOp::kMin, 1.5f, -inf), -inf);
  EXPECT_EQ(reduce_one<float>(ElementType::kFloat32, ReduceOp::kMax, 1.5f, inf), inf);
  EXPECT_TRUE(std::isnan(reduce_one<float>(ElementType::kFloat32, ReduceOp::kMin, 1.0f, nan)));
  EXPECT_TRUE(std::isnan(reduce_one<float>(ElementType::kFloat32, ReduceOp::kMax, nan, 1.0f)));
  EXPECT_TRUE(std::isnan(reduce_one<float>(ElementType::kFloat32, ReduceOp::kSum, inf, -inf)));
  EXPECT_EQ(reduce_one<double>(ElementType::kFloat64, ReduceOp::kSum, 0.1, 0.2), 0.1 + 0.2);
  EXPECT_EQ(reduce_one<double>(ElementType::kFloat64, ReduceOp::kProduct, 1e300, 1e10),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(reduce_one<double>(ElementType::kFloat64, ReduceOp::kMin, -0.5, 0.25), -0.5);
  EXPECT_TRUE(std::isnan(reduce_one<double>(ElementType::kFloat64, ReduceOp::kMax, 2.0, NAN)));
}

TEST(ReduceInto, HalfAndBFloat16ComputeInFloatAndRoundToNearestEven) {
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to even (1); 1 + 2^-10 + 2^-11: to 1 + 2^-9.
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kFloat16, ReduceOp::kSum, 0x3C00, 0x1000), 0x3C00);
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kFloat16, ReduceOp::kSum, 0x3C01, 0x1000), 0x3C02);
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kFloat16, ReduceOp::kProduct, 0x5C00, 0x5C00),
            0x7C00);  // 256^2 overflows to inf
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kFloat16, ReduceOp::kMin, 0xBC00, 0x3C00), 0xBC00);
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kFloat16, ReduceOp::kMax, 0xBC00, 0x3C00), 0x3C00);
  EXPECT_TRUE(
      half_is_nan(reduce_one<uint16_t>(ElementType::kFloat16, ReduceOp::kMax, 0x3C00, 0x7E00)));
  // bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7.
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kBFloat16, ReduceOp::kSum, 0x3F80, 0x3B80), 0x3F80);
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kBFloat16, ReduceOp::kSum, 0x3F81, 0x3B80), 0x3F82);
  EXPECT_EQ(reduce_one<uint16_t>(ElementType::kBFloat16, ReduceOp::kProduct, 0x4000, 0xC040),
            0xC0C0);  // 2 * -3 = -6
}

// Random arrays of every type and op against a per-element reference, with unaligned buffers.
TEST(ReduceInto, EveryTypeAndOpOnUnalignedArrays) {
  std::mt19937_64 rng(7);
  constexpr size_t kCount = 257;
  for (int t = 0; t < te::kElementTypeCount; ++t) {
    const auto type = static_cast<ElementType>(t);
    if (type == ElementType::kBool) continue;  // never reduced (below)
    const size_t es = te::element_size(type);
    for (int o = 0; o < te::kReduceOpCount; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      std::vector<std::byte> acc(kCount * es + 3), in(kCount * es + 5);
      for (auto& b : acc) b = static_cast<std::byte>(rng());
      for (auto& b : in) b = static_cast<std::byte>(rng());
      std::vector<std::byte> want(acc.begin() + 3, acc.end());
      for (size_t i = 0; i < kCount; ++i) {
        te::reduce_into(type, op, want.data() + i * es, in.data() + 5 + i * es, 1);
      }
      te::reduce_into(type, op, acc.data() + 3, in.data() + 5, kCount);
      ASSERT_EQ(std::memcmp(acc.data() + 3, want.data(), want.size()), 0)
          << te::element_type_name(type) << " " << te::reduce_op_name(op);
      // The identity of the op changes no value (from either side).
      std::vector<std::byte> id(kCount * es);
      te::fill_identity(type, op, id.data(), kCount);
      std::vector<std::byte> x(in.begin() + 5, in.end());
      te::reduce_into(type, op, x.data(), id.data(), kCount);
      ASSERT_TRUE(same_values(type, x.data(), in.data() + 5, kCount))
          << "identity of " << te::element_type_name(type) << " " << te::reduce_op_name(op);
      te::reduce_into(type, op, id.data(), in.data() + 5, kCount);
      ASSERT_TRUE(same_values(type, id.data(), in.data() + 5, kCount))
          << "identity of " << te::element_type_name(type) << " " << te::reduce_op_name(op);
    }
  }
  int64_t v = 0;
  // bool is moved, never reduced: submissions refuse it, and the kernels have none.
  for (int o = 0; o < te::kReduceOpCount; ++o) {
    EXPECT_THROW(te::reduce_into(ElementType::kBool, static_cast<ReduceOp>(o), &v, &v, 1),
                 std::invalid_argument);
    EXPECT_THROW(te::fill_identity(ElementType::kBool, static_cast<ReduceOp>(o), &v, 1),
                 std::invalid_argument);
  }
  EXPECT_THROW(te::reduce_into(static_cast<ElementType>(99), ReduceOp::kSum, &v, &v, 1),
               std::invalid_argument);
  EXPECT_THROW(te::reduce_into(ElementType::kInt64, static_cast<ReduceOp>(99), &v, &v, 1),
               std::invalid_argument);
}

TEST(FillIdentity, ValuesPerTypeAndOp) {
  uint16_t h = 0;
  te::fill_identity(ElementType::kFloat16, ReduceOp::kMin, &h, 1);
  EXPECT_EQ(h, 0x7C00);
  te::fill_identity(ElementType::kFloat16, ReduceOp::kMax, &h, 1);
  EXPECT_EQ(h, 0xFC00);
  te::fill_identity(ElementType::kFloat16, ReduceOp::kProduct, &h, 1);
  EXPECT_EQ(h, 0x3C00);
  te::fill_identity(ElementType::kBFloat16, ReduceOp::kMin, &h, 1);
  EXPECT_EQ(h, 0x7F80);
  te::fill_identity(ElementType::kBFloat16, ReduceOp::kMax, &h, 1);
  EXPECT_EQ(h, 0xFF80);
  te::fill_identity(ElementType::kBFloat16, ReduceOp::kSum, &h, 1);
  EXPECT_EQ(h, 0x0000);
  int8_t i8[2] = {5, 5};
  te::fill_identity(ElementType::kInt8, ReduceOp::kMin, i8, 2);
  EXPECT_EQ(i8[1], 127);
  te::fill_identity(ElementType::kInt8, ReduceOp::kMax, i8, 2);
  EXPECT_EQ(i8[0], -128);
  uint8_t u8 = 5;
  te::fill_identity(ElementType::kUint8, ReduceOp::kMax, &u8, 1);
  EXPECT_EQ(u8, 0);
  int64_t i64 = 0;
  te::fill_identity(ElementType::kInt64, ReduceOp::kMin, &i64, 1);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::max());
  te::fill_identity(ElementType::kInt64, ReduceOp::kAverage, &i64, 1);
  EXPECT_EQ(i64, 0);
  double d = 0;
  te::fill_identity(ElementType::kFloat64, ReduceOp::kMax, &d, 1);
  EXPECT_EQ(d, -std::numeric_limits<double>::infinity());
  float f = 0;
  te::fill_identity(ElementType::kFloat32, ReduceOp::kProduct, &f, 1);
  EXPECT_EQ(f, 1.0f);
}

TEST(ScaleValues, FloatsInTheirPrecisionIntegersTruncatedAndSaturated) {
  double d = 0.1;
  te::scale_values(ElementType::kFloat64, &d, 1, 3.0);
  EXPECT_EQ(d, 0.1 * 3.0);
  float f = 0.1f;
  te::scale_values(ElementType::kFloat32, &f, 1, 0.1);
  EXPECT_EQ(f, 0.1f * static_cast<float>(0.1));
  uint16_t h = 0x4200;  // 3.0
  te::scale_values(ElementType::kFloat16, &h, 1, 0.5);
  EXPECT_EQ(h, 0x3E00);  // 1.5
  h = 0x7BFF;
  te::scale_values(ElementType::kFloat16, &h, 1, 2.0);
  EXPECT_EQ(h, 0x7C00);
  uint16_t b = 0x3F80;  // 1.0
  te::scale_values(ElementType::kBFloat16, &b, 1, 1.0 / 3.0);
  EXPECT_EQ(b, te::float_to_bfloat16(static_cast<float>(1.0 / 3.0)));

  int8_t i8[4] = {100, -100, 7, -7};
  te::scale_values(ElementType::kInt8, i8, 4, 2.0);
  EXPECT_EQ(i8[0], 127);
  EXPECT_EQ(i8[1], -128);
  EXPECT_EQ(i8[2], 14);
  EXPECT_EQ(i8[3], -14);
  int32_t i32[2] = {7, -7};
  te::scale_values(ElementType::kInt32, i32, 2, 0.5);
  EXPECT_EQ(i32[0], 3);  // toward zero
  EXPECT_EQ(i32[1], -3);
  uint8_t u8[2] = {200, 10};
  te::scale_values(ElementType::kUint8, u8, 2, 2.0);
  EXPECT_EQ(u8[0], 255);
  EXPECT_EQ(u8[1], 20);
  te::scale_values(ElementType::kUint8, u8, 2, -1.0);
  EXPECT_EQ(u8[0], 0);
  int64_t i64[3] = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                    1 << 20};
  te::scale_values(ElementType::kInt64, i64, 3, 1.5);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(i64[2], 3 << 19);
  te::scale_values(ElementType::kInt64, i64, 3, std::nan(""));
  EXPECT_EQ(i64[2], 0);
}

TEST(ScaleValues, FactorOneLeavesEveryBitAlone) {
  uint16_t h[2] = {0x7C01, 0x0001};  // a signalling NaN and a subnormal
  te::scale_values(ElementType::kFloat16, h, 2, 1.0);
  EXPECT_EQ(h[0], 0x7C01);
  EXPECT_EQ(h[1], 0x0001);
  int64_t i = std::numeric_limits<int64_t>::max();  // not exact in double
  te::scale_values(ElementType::kInt64, &i, 1, 1.0);
  EXPECT_EQ(i, std::numeric_limits<int64_t>::max());
}

// fp16 arrays are converted with the CPU's F16C instructions where it has them (one value at a
// time in the tail and on unaligned arrays): every half against a partner, every op, and
// averaging and scaling of every half give the bits of the one-value path.
TEST(ReduceInto, HalfArraysGiveTheBitsOfOneValueAtATime) {
  std::vector<uint16_t> every(65536), partner(65536);
  for (size_t h = 0; h < every.size(); ++h) {
    every[h] = static_cast<uint16_t>(h);
    partner[h] = static_cast<uint16_t>(h * 40503u + 12345u);  // odd multiplier: a permutation
  }
  for (int o = 0; o < te::kReduceOpCount; ++o) {
    const auto op = static_cast<ReduceOp>(o);
    std::vector<uint16_t> want = every;
    for (size_t i = 0; i < want.size(); ++i) {
      te::reduce_into(ElementType::kFloat16, op, &want[i], &partner[i], 1);
    }
    std::vector<uint16_t> got = every;
    te::reduce_into(ElementType::kFloat16, op, got.data(), partner.data(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << te::reduce_op_name(op) << " " << std::hex << every[i] << ", "
                                 << partner[i];
    }
  }
  std::vector<uint16_t> divided = every, scaled = every;
  te::divide_values(ElementType::kFloat16, divided.data(), divided.size(), 3);
  te::scale_values(ElementType::kFloat16, scaled.data(), scaled.size(), 0.37);
  std::vector<float> widened(every.size());
  te::to_float32(ElementType::kFloat16, every.data(), widened.data(), every.size());
  std::vector<uint16_t> narrowed(every.size());
  te::from_float32(ElementType::kFloat16, widened.data(), narrowed.data(), every.size());
  for (size_t i = 0; i < every.size(); ++i) {
    uint16_t d = every[i];
    uint16_t s = every[i];
    te::divide_values(ElementType::kFloat16, &d, 1, 3);
    te::scale_values(ElementType::kFloat16, &s, 1, 0.37);
    ASSERT_EQ(divided[i], d) << std::hex << every[i];
    ASSERT_EQ(scaled[i], s) << std::hex << every[i];
    ASSERT_EQ(bits(widened[i]), bits(te::half_to_float(every[i]))) << std::hex << every[i];
    ASSERT_EQ(narrowed[i], te::float_to_half(te::half_to_float(every[i]))) << std::hex << every[i];
  }
}

TEST(DivideValues, FloatsDivideIntegersTruncate) {
  int32_t i32[3] = {-7, 7, 9};
  te::divide_values(ElementType::kInt32, i32, 3, 2);
  EXPECT_EQ(i32[0], -3);
  EXPECT_EQ(i32[1], 3);
  EXPECT_EQ(i32[2], 4);
  int64_t i64 = std::numeric_limits<int64_t>::min();
  te::divide_values(ElementType::kInt64, &i64, 1, -1);
  EXPECT_EQ(i64, std::numeric_limits<int64_t>::min());
  int8_t i8 = -128;
  te::divide_values(ElementType::kInt8, &i8, 1, -1);
  EXPECT_EQ(i8, -128);
  uint8_t u8 = 255;
  te::divide_values(ElementType::kUint8, &u8, 1, 4);
  EXPECT_EQ(u8, 63);
  float f = 1.0f;
  te::divide_values(ElementType::kFloat32, &f, 1, 3);
  EXPECT_EQ(f, 1.0f / 3.0f);
  double d = 1.0;
  te::divide_values(ElementType::kFloat64, &d, 1, 3);
  EXPECT_EQ(d, 1.0 / 3.0);
  uint16_t h = 0x3C00;
  te::divide_values(ElementType::kFloat16, &h, 1, 3);
  EXPECT_EQ(h, te::float_to_half(1.0f / 3.0f));
  EXPECT_THROW(te::divide_values(ElementType::kFloat32, &f, 1, 0), std::invalid_argument);
}

}  // namespace
