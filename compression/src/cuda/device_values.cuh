// Internal: reading fp32, fp16 and bf16 input as fp32 on the device (exact widening, the same
// bits as widen.cc's on the CPU), and the scales the encode passes derive.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "threelc/compression/codec.h"
#include "threelc/compression/float16.h"

namespace threelc::compression::cuda::detail {

struct Fp32Input {
  const float* data;
  __device__ float operator[](size_t i) const { return data[i]; }
};

// float16.h's conversion, compiled for the device: NaN payloads, which a raw block carries, come
// out as on the CPU (the hardware conversion may canonicalize them).
struct Fp16Input {
  const uint16_t* data;
  __device__ float operator[](size_t i) const { return half_to_float(data[i]); }
};

struct Bf16Input {
  const uint16_t* data;
  __device__ float operator[](size_t i) const { return bfloat16_to_float(data[i]); }
};

// Calls body(input) with the typed reader of `x`.
template <typename Body>
cudaError_t with_input(const void* x, DType dtype, Body&& body) {
  switch (dtype) {
    case DType::kFloat32:
      return body(Fp32Input{static_cast<const float*>(x)});
    case DType::kFloat16:
      return body(Fp16Input{static_cast<const uint16_t*>(x)});
    case DType::kBFloat16:
      return body(Bf16Input{static_cast<const uint16_t*>(x)});
  }
  return cudaErrorInvalidValue;
}

inline constexpr uint32_t kNonFiniteBits = 0x7F800000u;

// A scale M * s from the bit pattern of M, as encode.cc computes it: the block's, or in v2 a
// tile's.
__device__ inline float scale_of(uint32_t max_bits, float sparsity) {
  return __fmul_rn(__uint_as_float(max_bits), sparsity);
}

// The block's scale; false when the block must go raw.
__device__ inline bool block_scale(uint32_t max_bits, float sparsity, float* scale) {
  *scale = scale_of(max_bits, sparsity);
  return max_bits < kNonFiniteBits && isfinite(*scale);
}

}  // namespace threelc::compression::cuda::detail
