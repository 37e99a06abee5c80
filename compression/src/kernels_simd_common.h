// Internal: what the SIMD kernel sets (kernels_avx2.cc, kernels_avx512.cc) share. The kernels'
// loops are written once here, as templates over a per-ISA traits struct T that each kernel
// file defines and instantiates (kernel_set<T>) under its own -m flags: the loops hold what does
// not depend on the vector width (head and tail split, chunk walk, zero-run walk, the scalar
// tails through kernels_reference.h's range functions), the traits what does (loads, compares,
// masks, packing). The traits' functions are inlined into the loops: no indirection per element.
// Internal linkage (anonymous namespace) for the reason kernels_reference.h gives: an
// instantiation compiled with -mavx512* must never be merged by the linker with one compiled
// without it, and then run on a CPU without AVX-512.
//
// A traits struct T has, all static:
//   kLanes                  fp32 lanes of a vector (8, 16)
//   Ps, U32                 a vector of kLanes floats / uint32s
//   set1_ps, load_ps, store_ps, add_ps, mul_ps   the fp32 operations (unaligned loads/stores)
//   zero_u32, max_u32, hmax                      uint32 max and its horizontal max
//   abs_bits(x), abs_bits(x, e)                  the bit patterns of |x| and |x + e|, kLanes values
//   Thresholds, thresholds(scale, h)             scale, h and -h as vectors
//   quantize32<kHasError>, quantize_lanes<kHasError>   32 / kLanes group bytes of a tile
//   Bytes64, load64, store64, zero_group_mask    64 group bytes; bit i: byte i is a zero group
//   copy_literals(dst, src, len, at, g)          len <= 64 bytes from src = groups + at (at < g)
//   Bytes, kBytes, load_bytes, store_bytes, all_literals   one vector of encoded bytes
//   unpack_lanes(groups, g, scale, neg_scale, dst)         kLanes groups of unpack_tile
//   chunk_trit_masks(groups, pos, neg)           trit masks of 64 groups (false: all zero groups)
//   lane_bits(bits, q)      bits q*kLanes .. (q+1)*kLanes - 1 of a 64-bit mask, for add_lanes
//   add_lanes(dst, mask, pos, step, neg_step)    kLanes values of unpack_tile_add
//   kRawAddOneVectorLoop    raw_add takes one more vector before the scalar tail
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels.h"
// Only some reference functions serve as tails here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels_reference.h"
#pragma GCC diagnostic pop
#include "threelc/compression/block_format.h"

namespace threelc::compression::detail::simd {
namespace {

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

// Groups whose five elements are all in range: j < values - 4g.
inline size_t full_groups(size_t values, size_t g) { return values >= 4 * g ? values - 4 * g : 0; }

template <class T>
uint32_t abs_max_bits(const float* x, const float* e, size_t n) {
  constexpr size_t kLanes = T::kLanes;
  typename T::U32 m0 = T::zero_u32(), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  if (e != nullptr) {
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
      m0 = T::max_u32(m0, T::abs_bits(x + i, e + i));
      m1 = T::max_u32(m1, T::abs_bits(x + i + kLanes, e + i + kLanes));
      m2 = T::max_u32(m2, T::abs_bits(x + i + 2 * kLanes, e + i + 2 * kLanes));
      m3 = T::max_u32(m3, T::abs_bits(x + i + 3 * kLanes, e + i + 3 * kLanes));
    }
  } else {
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
      m0 = T::max_u32(m0, T::abs_bits(x + i));
      m1 = T::max_u32(m1, T::abs_bits(x + i + kLanes));
      m2 = T::max_u32(m2, T::abs_bits(x + i + 2 * kLanes));
      m3 = T::max_u32(m3, T::abs_bits(x + i + 3 * kLanes));
    }
  }
  const uint32_t vmax = T::hmax(T::max_u32(T::max_u32(m0, m1), T::max_u32(m2, m3)));
  const uint32_t tmax = reference::abs_max_bits(x + i, e != nullptr ? e + i : nullptr, n - i);
  return vmax > tmax ? vmax : tmax;
}

// Groups [j, end) of a tile, 32 and then kLanes at a time; returns the first group left.
template <class T, bool kHasError>
size_t quantize_main(const float* x, float* e, size_t j, size_t end, size_t g, float scale, float h,
                     uint8_t* groups) {
  const typename T::Thresholds v = T::thresholds(scale, h);
  for (; j + 32 <= end; j += 32) {
    T::template quantize32<kHasError>(x, e, j, g, v, groups + j);
  }
  for (; j + T::kLanes <= end; j += T::kLanes) {
    T::template quantize_lanes<kHasError>(x, e, j, g, v, groups + j);
  }
  return j;
}

template <class T>
void quantize_tile(const float* x, float* e, size_t values, size_t g, float scale, float h,
                   uint8_t* groups) {
  const size_t full = full_groups(values, g);
  size_t j = 0;
  if (e == nullptr) {
    j = quantize_main<T, false>(x, e, 0, full, g, scale, h, groups);
  } else {
    j = quantize_main<T, true>(x, e, 0, full, g, scale, h, groups);
  }
  reference::quantize_groups(x, e, values, g, scale, h, groups, j, g);
}

template <class T>
size_t zero_run_encode(const uint8_t* groups, size_t g, uint8_t* out) {
  size_t written = 0;
  size_t run = 0;
  size_t p = 0;
  for (; p + 64 <= g; p += 64) {
    const typename T::Bytes64 v = T::load64(groups + p);
    const uint64_t zeros = T::zero_group_mask(v);
    if (zeros == ~uint64_t{0}) {
      run += 64;
      continue;
    }
    if (zeros == 0) {
      if (run != 0) {
        written = reference::flush_run(out, written, run);
        run = 0;
      }
      // written <= p, so the 64 bytes stay inside the g bytes out holds.
      T::store64(out + written, v);
      written += 64;
      continue;
    }
    uint64_t literals = ~zeros;
    size_t pos = 0;
    while (literals != 0) {
      const size_t start = static_cast<size_t>(_tzcnt_u64(literals));
      run += start - pos;
      if (run != 0) {
        written = reference::flush_run(out, written, run);
        run = 0;
      }
      const uint64_t after = zeros >> start;
      const size_t len = after != 0 ? static_cast<size_t>(_tzcnt_u64(after)) : 64 - start;
      // written <= p + start: an N-byte copy stays inside both buffers while p + start + N <= g.
      T::copy_literals(out + written, groups + p + start, len, p + start, g);
      written += len;
      pos = start + len;
      literals = pos < 64 ? literals & (~uint64_t{0} << pos) : 0;
    }
    run += 64 - pos;
  }
  return reference::encode_rest(groups, p, g, out, written, run);
}

// Every group starts as a zero group (one memset of the g bytes); then each encoded byte writes
// its group byte at the current position (a literal its own value, a run a zero group again)
// and moves the position on by the groups it stands for. One byte store per encoded byte, table
// lookups instead of a branch (literals and runs alternate unpredictably), and no write past
// the g groups: a validated tile's bytes expand to exactly g.
template <class T>
void zero_run_expand(const uint8_t* in, size_t length, size_t g, uint8_t* groups) {
  constexpr size_t kBytes = T::kBytes;
  std::memset(groups, kZeroGroup, g);
  size_t p = 0;
  size_t j = 0;
  while (p + kBytes <= length) {
    const typename T::Bytes v = T::load_bytes(in + p);
    if (T::all_literals(v)) {
      // kBytes literals: kBytes groups, inside g because the tile was validated.
      T::store_bytes(groups + j, v);
      j += kBytes;
      p += kBytes;
      continue;
    }
    for (const size_t end = p + kBytes; p < end; ++p) {
      groups[j] = kExpand.value[in[p]];
      j += kExpand.advance[in[p]];
    }
  }
  for (; p < length; ++p) {
    groups[j] = kExpand.value[in[p]];
    j += kExpand.advance[in[p]];
  }
}

template <class T>
void unpack_tile(const uint8_t* groups, size_t values, size_t g, float scale_f, float* dst) {
  const size_t full = full_groups(values, g);
  const typename T::Ps scale = T::set1_ps(scale_f);
  const typename T::Ps neg_scale = T::set1_ps(-scale_f);
  size_t j = 0;
  for (; j + T::kLanes <= full; j += T::kLanes) {
    T::unpack_lanes(groups + j, g, scale, neg_scale, dst + j);
  }
  reference::unpack_groups(groups, values, g, scale_f, dst, j, g);
}

// Decodes chunks of 64 groups. Only values with a non-zero trit are read and written: one by
// one where a row of 64 holds few of them (a sparse gradient's updates are scattered; a
// vector at an unaligned address would pull in two cache lines for one value), with
// kLanes-lane vectors where it holds many.
template <class T>
void unpack_tile_add(const uint8_t* groups, size_t values, size_t g, float step_f, float* dst) {
  constexpr int kScalarMax = 6;
  constexpr size_t kLanes = T::kLanes;
  const size_t full = full_groups(values, g);
  const size_t chunks = full / 64;
  const typename T::Ps step = T::set1_ps(step_f);
  const typename T::Ps neg_step = T::set1_ps(-step_f);
  const float neg_step_f = -step_f;
  for (size_t c = 0; c < chunks; ++c) {
    uint64_t pos[kTritsPerGroup], neg[kTritsPerGroup];
    if (!T::chunk_trit_masks(groups + 64 * c, pos, neg)) continue;  // 320 values untouched
    for (size_t k = 0; k < kTritsPerGroup; ++k) {
      uint64_t nz = pos[k] | neg[k];
      if (nz == 0) continue;
      float* row = dst + 64 * c + k * g;
      if (_mm_popcnt_u64(nz) <= kScalarMax) {
        do {
          const unsigned i = static_cast<unsigned>(_tzcnt_u64(nz));
          nz = _blsr_u64(nz);
          row[i] = row[i] + (((pos[k] >> i) & 1u) != 0 ? step_f : neg_step_f);
        } while (nz != 0);
        continue;
      }
      // Every vector of the row, without testing whether it holds a non-zero trit: in a row
      // this dense, whether 8 values hold one is close to a coin toss (a scale per tile of 320
      // makes about 15 % of Gaussian trits non-zero), and the mispredicted branch cost more
      // than the vector (docs/BENCHMARKS.md, "Codec throughput").
      for (size_t q = 0; q < 64 / kLanes; ++q) {
        // All kLanes lanes lie in this row of this tile; lanes outside the mask are stored
        // unchanged.
        T::add_lanes(row + kLanes * q, T::lane_bits(nz, q), T::lane_bits(pos[k], q), step,
                     neg_step);
      }
    }
  }
  reference::unpack_add_groups(groups, values, g, step_f, dst, 64 * chunks, g);
}

template <class T>
void raw_add(const uint8_t* src, size_t n, float alpha_f, float* dst) {
  constexpr size_t kLanes = T::kLanes;
  const typename T::Ps alpha = T::set1_ps(alpha_f);
  size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const typename T::Ps s0 = T::mul_ps(alpha, T::load_ps(src + 4 * i));
    const typename T::Ps s1 = T::mul_ps(alpha, T::load_ps(src + 4 * (i + kLanes)));
    T::store_ps(dst + i, T::add_ps(T::load_ps(dst + i), s0));
    T::store_ps(dst + i + kLanes, T::add_ps(T::load_ps(dst + i + kLanes), s1));
  }
  if constexpr (T::kRawAddOneVectorLoop) {
    for (; i + kLanes <= n; i += kLanes) {
      const typename T::Ps s = T::mul_ps(alpha, T::load_ps(src + 4 * i));
      T::store_ps(dst + i, T::add_ps(T::load_ps(dst + i), s));
    }
  }
  reference::raw_add(src + 4 * i, n - i, alpha_f, dst + i);
}

// The kernel table of ISA T (a constant: no initialization at run time).
template <class T>
constexpr Kernels kernel_set(const char* name) {
  return {
      name,           abs_max_bits<T>,    quantize_tile<T>, zero_run_encode<T>, zero_run_expand<T>,
      unpack_tile<T>, unpack_tile_add<T>, raw_add<T>};
}

}  // namespace
}  // namespace threelc::compression::detail::simd
