// Internal: the scalar reference kernels, the definition every SIMD path must match bit for
// bit. SIMD kernel files call them for tails. They have internal linkage on purpose: each
// kernel file is compiled with its own -m flags, and an inline function with external linkage
// could be merged into the AVX-512 object's copy and then run on a CPU without AVX-512.
#pragma once

#include <cstring>

#include "threelc/compression/block_format.h"

namespace threelc::compression::detail::reference {
namespace {

uint32_t float_bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

uint32_t abs_max_bits(const float* x, const float* e, size_t n) {
  uint32_t max_bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = e != nullptr ? x[i] + e[i] : x[i];
    const uint32_t bits = float_bits(a) & 0x7FFFFFFFu;
    max_bits = bits > max_bits ? bits : max_bits;
  }
  return max_bits;
}

// Quantizes groups [jb, je) of a tile (see Kernels::quantize_tile).
void quantize_groups(const float* x, float* e, size_t values, size_t g, float scale, float h,
                     uint8_t* groups, size_t jb, size_t je) {
  static constexpr uint32_t kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  for (size_t j = jb; j < je; ++j) {
    uint32_t byte = 0;
    for (size_t k = 0; k < kTritsPerGroup; ++k) {
      const size_t i = j + k * g;
      uint32_t trit = 1;
      if (i < values) {
        const float a = e != nullptr ? x[i] + e[i] : x[i];
        if (a > h) {
          trit = 2;
          if (e != nullptr) e[i] = a - scale;
        } else if (a < -h) {
          trit = 0;
          if (e != nullptr) e[i] = a + scale;
        } else if (e != nullptr) {
          e[i] = a;
        }
      }
      byte += kWeight[k] * trit;
    }
    groups[j] = static_cast<uint8_t>(byte);
  }
}

// Groups [jb, je) of unpack_tile.
void unpack_groups(const uint8_t* groups, size_t values, size_t g, float scale, float* dst,
                   size_t jb, size_t je) {
  for (size_t j = jb; j < je; ++j) {
    uint32_t v = groups[j];
    for (size_t k = kTritsPerGroup; k-- > 0;) {
      const uint32_t trit = v % 3;
      v /= 3;
      const size_t i = j + k * g;
      if (i < values) dst[i] = trit == 2 ? scale : (trit == 0 ? -scale : 0.0f);
    }
  }
}

// Groups [jb, je) of unpack_tile_add.
void unpack_add_groups(const uint8_t* groups, size_t values, size_t g, float step, float* dst,
                       size_t jb, size_t je) {
  for (size_t j = jb; j < je; ++j) {
    uint32_t v = groups[j];
    if (v == kZeroGroup) continue;
    for (size_t k = kTritsPerGroup; k-- > 0;) {
      const uint32_t trit = v % 3;
      v /= 3;
      const size_t i = j + k * g;
      if (i >= values || trit == 1) continue;
      dst[i] = dst[i] + (trit == 2 ? step : -step);
    }
  }
}

// Appends the encoding of a run of `run` zero groups at out[written]; returns the new length.
inline size_t flush_run(uint8_t* out, size_t written, size_t run) {
  if (run >= kRun14) {
    const size_t full = run / kRun14;
    if (full <= 8) {
      for (size_t r = 0; r < full; ++r) out[written + r] = kRun14Byte;
    } else {
      std::memset(out + written, kRun14Byte, full);
    }
    written += full;
    run -= full * kRun14;
  }
  if (run == 1) {
    out[written++] = kZeroGroup;
  } else if (run >= 2) {
    out[written++] = static_cast<uint8_t>(kFirstRunByte + (run - 2));
  }
  return written;
}

// Continues a zero-run encode at group j with `run` zero groups pending; returns the total
// length written.
size_t encode_rest(const uint8_t* groups, size_t j, size_t g, uint8_t* out, size_t written,
                   size_t run) {
  for (; j < g; ++j) {
    const uint8_t b = groups[j];
    if (b == kZeroGroup) {
      ++run;
    } else {
      written = flush_run(out, written, run);
      run = 0;
      out[written++] = b;
    }
  }
  return flush_run(out, written, run);
}

// Expands encoded bytes in[p..length) into groups starting at j (exact writes only).
void expand_rest(const uint8_t* in, size_t p, size_t length, size_t j, uint8_t* groups) {
  for (; p < length; ++p) {
    const uint8_t b = in[p];
    if (b < kFirstRunByte) {
      groups[j++] = b;
    } else {
      const size_t run = b - 241u;
      std::memset(groups + j, kZeroGroup, run);
      j += run;
    }
  }
}

// The kernel entries: the range functions over a whole tile.
void quantize_tile(const float* x, float* e, size_t values, size_t g, float scale, float h,
                   uint8_t* groups) {
  quantize_groups(x, e, values, g, scale, h, groups, 0, g);
}

size_t zero_run_encode(const uint8_t* groups, size_t g, uint8_t* out) {
  return encode_rest(groups, 0, g, out, 0, 0);
}

void zero_run_expand(const uint8_t* in, size_t length, size_t /*g*/, uint8_t* groups) {
  expand_rest(in, 0, length, 0, groups);
}

void unpack_tile(const uint8_t* groups, size_t values, size_t g, float scale, float* dst) {
  unpack_groups(groups, values, g, scale, dst, 0, g);
}

void unpack_tile_add(const uint8_t* groups, size_t values, size_t g, float step, float* dst) {
  unpack_add_groups(groups, values, g, step, dst, 0, g);
}

void raw_add(const uint8_t* src, size_t n, float alpha, float* dst) {
  for (size_t i = 0; i < n; ++i) {
    float value;
    std::memcpy(&value, src + 4 * i, sizeof value);
    const float scaled = alpha * value;
    dst[i] = dst[i] + scaled;
  }
}
}  // namespace
}  // namespace threelc::compression::detail::reference
