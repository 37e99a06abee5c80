#include "widen.h"

#include <cstring>

namespace threelc::compression::detail {
namespace {

float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return from_bits(sign | 0x7F800000u | (mantissa << 13));  // Inf, NaN
  if (exponent != 0) return from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return from_bits(sign);  // +-0
  // Subnormal half: normalize into an fp32 normal.
  uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return from_bits(sign | (e << 23) | ((mantissa & 0x3FFu) << 13));
}

}  // namespace

void widen(DType dtype, const void* src, size_t offset, size_t n, float* dst) {
  if (dtype == DType::kFloat32) {
    std::memcpy(dst, static_cast<const float*>(src) + offset, n * sizeof(float));
    return;
  }
  const auto* halves = static_cast<const uint16_t*>(src) + offset;
  if (dtype == DType::kBFloat16) {
    for (size_t i = 0; i < n; ++i) dst[i] = from_bits(static_cast<uint32_t>(halves[i]) << 16);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(halves[i]);
  }
}

}  // namespace threelc::compression::detail
