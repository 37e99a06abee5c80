// Internal: the per-ISA kernels behind the codec. Every kernel set computes bit-identical
// results; the drivers (encode.cc, decode.cc) own the block layout, validation and dtypes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "threelc/compression/codec.h"

namespace threelc::compression::detail {

struct Kernels {
  const char* name;

  // max over i of the bit pattern of |x[i] + e[i]| (sign cleared), as uint32. A result
  // >= 0x7F800000 means some x[i] + e[i] is Inf or NaN. `e` may be null (taken as 0).
  uint32_t (*abs_max_bits)(const float* x, const float* e, size_t n);

  // Quantizes one tile of `values` values with `g` = tile_groups(values) groups:
  // a = x + e; q = +1 if a > h, -1 if a < -h, else 0; e = a - q * scale (if e is non-null);
  // groups[j] = 81*(q[j]+1) + 27*(q[j+g]+1) + 9*(q[j+2g]+1) + 3*(q[j+3g]+1) + (q[j+4g]+1),
  // positions >= values counting as q = 0.
  void (*quantize_tile)(const float* x, float* e, size_t values, size_t g, float scale, float h,
                        uint8_t* groups);

  // Zero-run encodes g group bytes; returns the bytes written to out (at most g).
  size_t (*zero_run_encode)(const uint8_t* groups, size_t g, uint8_t* out);

  // Expands a tile's encoded bytes (already validated to expand to exactly g groups) into
  // g group bytes.
  void (*zero_run_expand)(const uint8_t* in, size_t length, size_t g, uint8_t* groups);

  // dst[j + k*g] = (t - 1) * scale for every trit t of groups[j] at position j + k*g < values.
  void (*unpack_tile)(const uint8_t* groups, size_t values, size_t g, float scale, float* dst);

  // dst[j + k*g] += q * step for non-zero trits (step = alpha * scale, so q * step equals
  // alpha * (q * scale) exactly); zero trits leave dst untouched.
  void (*unpack_tile_add)(const uint8_t* groups, size_t values, size_t g, float step, float* dst);

  // dst[i] += alpha * src[i] (fp32 multiply, then fp32 add); src is little-endian fp32 at any
  // alignment.
  void (*raw_add)(const uint8_t* src, size_t n, float alpha, float* dst);
};

const Kernels& scalar_kernels();
// Defined only when the compiler can target the ISA; callers check isa_supported() first.
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

// Kernels for `isa` (kAuto: the detected one). Falls back to scalar for unsupported ISAs.
const Kernels& kernels_for(Isa isa);

}  // namespace threelc::compression::detail
