// Internal: fp16 -> fp32 widening on bit patterns, as float16.h's half_to_float computes it
// (NaN payloads and signs kept, subnormals normalized), for host and device. The kernels use
// it rather than the hardware conversion, which may canonicalize NaNs that a raw block carries;
// tests/unit/compression/cuda_tile_rules_test.cc checks all 65536 patterns on the host.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace threelc::compression::cuda::rules {

THREELC_HOST_DEVICE inline uint32_t widen_half_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return sign | 0x7F800000u | (mantissa << 13);  // inf, NaN
  if (exponent != 0) return sign | ((exponent + 112) << 23) | (mantissa << 13);
  if (mantissa == 0) return sign;
  uint32_t e = 113;  // subnormal: shift the leading one into the implicit bit
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
}

}  // namespace threelc::compression::cuda::rules
