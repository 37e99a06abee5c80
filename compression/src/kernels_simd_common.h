// Internal: scalar pieces shared by the SIMD kernel files (kernels_avx2.cc, kernels_avx512.cc):
// heads and tails of tiles that are not worth a vector, written to match kernels_reference.h
// bit for bit, plus the zero-run writer. Everything has internal linkage for the same reason
// as kernels_reference.h: each kernel file is compiled with its own -m flags, and an inline
// function with external linkage could be merged across them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "threelc/compression/block_format.h"

namespace threelc::compression::detail::simd {
namespace {

// Quantizes groups [jb, je) of a tile exactly as reference::quantize_tile does for them.
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

// Groups [jb, je) of reference::unpack_tile.
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

// Groups [jb, je) of reference::unpack_tile_add.
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

// Per encoded byte b: the group byte written at the current position (b itself for a literal,
// 121 for a run) and the number of groups it stands for (1, or b - 241 for a run). Table
// lookups instead of a branch: literals and runs alternate unpredictably.
struct ExpandTable {
  uint8_t value[256];
  uint8_t advance[256];
};

constexpr ExpandTable make_expand_table() {
  ExpandTable t{};
  for (uint32_t b = 0; b < 256; ++b) {
    const bool run = b >= kFirstRunByte;
    t.value[b] = static_cast<uint8_t>(run ? uint32_t{kZeroGroup} : b);
    t.advance[b] = static_cast<uint8_t>(run ? b - 241u : 1u);
  }
  return t;
}

constexpr ExpandTable kExpand = make_expand_table();

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

}  // namespace
}  // namespace threelc::compression::detail::simd
