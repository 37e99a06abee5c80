// Conversions between fp32 and the 16-bit float formats (IEEE binary16, bfloat16): exact
// widening, and narrowing with round-to-nearest-even (NaN stays a quiet NaN, overflow becomes
// infinity). Used by the codec (widening its fp16/bf16 input) and the engine (reductions and
// conversions of fp16/bf16 tensors), on the CPU and, compiled by nvcc, in CUDA kernels: the
// same code gives the same bits on both (the hardware conversions may canonicalize NaNs).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define THREELC_FLOAT16_FN __host__ __device__ inline
#else
#define THREELC_FLOAT16_FN inline
#endif

namespace threelc::compression {

namespace float16_detail {
THREELC_FLOAT16_FN float float_of(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}
THREELC_FLOAT16_FN uint32_t bits_of(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}
}  // namespace float16_detail

THREELC_FLOAT16_FN float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu)
    return float16_detail::float_of(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0)
    return float16_detail::float_of(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return float16_detail::float_of(sign);
  // Subnormal half (mantissa * 2^-24): shift the leading one into the implicit bit.
  uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return float16_detail::float_of(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
}

THREELC_FLOAT16_FN uint16_t float_to_half(float f) {
  const uint32_t x = float16_detail::bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {  // NaN: the top payload bits, made quiet so that it stays a NaN
    return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  }
  if (a >= 0x477FF000u) {  // >= 65520 (the tie above 65504, whose mantissa is odd) and inf
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (a >= 0x38800000u) {  // normal half (>= 2^-14): rebias the exponent, round 13 bits off
    uint32_t h = (a - 0x38000000u) >> 13;
    const uint32_t rest = a & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;  // a carry is still right
    return static_cast<uint16_t>(sign | h);
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 (a tie) rounds to 0
  // Subnormal half: the value in units of 2^-24 is m * 2^(e - 126), e in 102..112.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1);
  const uint32_t tie = 1u << (shift - 1);
  if (rest > tie || (rest == tie && (h & 1u) != 0)) ++h;
  return static_cast<uint16_t>(sign | h);
}

THREELC_FLOAT16_FN float bfloat16_to_float(uint16_t b) {
  return float16_detail::float_of(static_cast<uint32_t>(b) << 16);
}

THREELC_FLOAT16_FN uint16_t float_to_bfloat16(float f) {
  uint32_t x = float16_detail::bits_of(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  x += 0x7FFFu + ((x >> 16) & 1u);  // round to nearest even; overflow carries into inf
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace threelc::compression
