// The AVX2 (+BMI2) kernel set. Bit-identical to kernels_reference.h: the same fp32 operations
// in the same order, only 8 lanes at a time. Compiled with its own -m flags
// (compression/CMakeLists.txt); dispatch.cc calls it only on CPUs that have them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels.h"
// Only some reference functions serve as tails here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels_reference.h"
#pragma GCC diagnostic pop
#include "kernels_simd_common.h"

namespace threelc::compression::detail {
namespace {

namespace ref = reference;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

uint32_t abs_max_bits(const float* x, const float* e, size_t n) {
  const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  if (e != nullptr) {
    for (; i + 32 <= n; i += 32) {
      const __m256 a0 = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(e + i));
      const __m256 a1 = _mm256_add_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(e + i + 8));
      const __m256 a2 = _mm256_add_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(e + i + 16));
      const __m256 a3 = _mm256_add_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(e + i + 24));
      m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_castps_si256(a0), mask));
      m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_castps_si256(a1), mask));
      m2 = _mm256_max_epu32(m2, _mm256_and_si256(_mm256_castps_si256(a2), mask));
      m3 = _mm256_max_epu32(m3, _mm256_and_si256(_mm256_castps_si256(a3), mask));
    }
  } else {
    for (; i + 32 <= n; i += 32) {
      m0 = _mm256_max_epu32(m0, _mm256_and_si256(load256(x + i), mask));
      m1 = _mm256_max_epu32(m1, _mm256_and_si256(load256(x + i + 8), mask));
      m2 = _mm256_max_epu32(m2, _mm256_and_si256(load256(x + i + 16), mask));
      m3 = _mm256_max_epu32(m3, _mm256_and_si256(load256(x + i + 24), mask));
    }
  }
  __m256i m = _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xB1));
  const uint32_t vmax = static_cast<uint32_t>(_mm_cvtsi128_si32(h));
  const uint32_t tmax = ref::abs_max_bits(x + i, e != nullptr ? e + i : nullptr, n - i);
  return vmax > tmax ? vmax : tmax;
}

// One 8-group vector: quantizes x[j + k*g] (k = 0..4), updates e, returns the 8 group bytes
// as int32 lanes (121 + sum of weight * q, evaluated in Horner form).
template <bool kHasError>
inline __m256i quantize8(const float* x, float* e, size_t j, size_t g, __m256 scale, __m256 h,
                         __m256 neg_h) {
  __m256i acc = _mm256_setzero_si256();
  for (size_t k = 0; k < kTritsPerGroup; ++k) {
    const size_t i = j + k * g;
    __m256 a = _mm256_loadu_ps(x + i);
    if constexpr (kHasError) a = _mm256_add_ps(a, _mm256_loadu_ps(e + i));
    const __m256 gt = _mm256_cmp_ps(a, h, _CMP_GT_OQ);
    const __m256 lt = _mm256_cmp_ps(a, neg_h, _CMP_LT_OQ);
    // q = lt_mask - gt_mask (masks are -1): +1 above h, -1 below -h.
    const __m256i q = _mm256_sub_epi32(_mm256_castps_si256(lt), _mm256_castps_si256(gt));
    if (k == 0) {
      acc = q;
    } else {
      acc = _mm256_add_epi32(_mm256_add_epi32(acc, _mm256_add_epi32(acc, acc)), q);
    }
    if constexpr (kHasError) {
      __m256 r = _mm256_blendv_ps(a, _mm256_sub_ps(a, scale), gt);
      r = _mm256_blendv_ps(r, _mm256_add_ps(a, scale), lt);
      _mm256_storeu_ps(e + i, r);
    }
  }
  return _mm256_add_epi32(acc, _mm256_set1_epi32(kZeroGroup));
}

template <bool kHasError>
size_t quantize_main(const float* x, float* e, size_t j, size_t end, size_t g, float scale_f,
                     float h_f, uint8_t* groups) {
  const __m256 scale = _mm256_set1_ps(scale_f);
  const __m256 h = _mm256_set1_ps(h_f);
  const __m256 neg_h = _mm256_set1_ps(-h_f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (; j + 32 <= end; j += 32) {
    const __m256i b0 = quantize8<kHasError>(x, e, j, g, scale, h, neg_h);
    const __m256i b1 = quantize8<kHasError>(x, e, j + 8, g, scale, h, neg_h);
    const __m256i b2 = quantize8<kHasError>(x, e, j + 16, g, scale, h, neg_h);
    const __m256i b3 = quantize8<kHasError>(x, e, j + 24, g, scale, h, neg_h);
    // Lane-wise packs interleave 128-bit halves; the permute restores group order.
    const __m256i w01 = _mm256_packs_epi32(b0, b1);
    const __m256i w23 = _mm256_packs_epi32(b2, b3);
    const __m256i bytes = _mm256_packus_epi16(w01, w23);
    store256(groups + j, _mm256_permutevar8x32_epi32(bytes, order));
  }
  for (; j + 8 <= end; j += 8) {
    const __m256i b = quantize8<kHasError>(x, e, j, g, scale, h, neg_h);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(groups + j), _mm_packus_epi16(w, w));
  }
  return j;
}

void quantize_tile(const float* x, float* e, size_t values, size_t g, float scale, float h,
                   uint8_t* groups) {
  const size_t full = values >= 4 * g ? values - 4 * g : 0;
  size_t j = 0;
  if (e == nullptr) {
    j = quantize_main<false>(x, e, 0, full, g, scale, h, groups);
  } else {
    j = quantize_main<true>(x, e, 0, full, g, scale, h, groups);
  }
  reference::quantize_groups(x, e, values, g, scale, h, groups, j, g);
}

size_t zero_run_encode(const uint8_t* groups, size_t g, uint8_t* out) {
  const __m256i zero_group = _mm256_set1_epi8(static_cast<char>(kZeroGroup));
  size_t written = 0;
  size_t run = 0;
  size_t p = 0;
  for (; p + 64 <= g; p += 64) {
    const __m256i v0 = load256(groups + p);
    const __m256i v1 = load256(groups + p + 32);
    const uint64_t zeros =
        static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v0, zero_group))) |
        (uint64_t{static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v1, zero_group)))}
         << 32);
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
      store256(out + written, v0);
      store256(out + written + 32, v1);
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
      const uint8_t* src = groups + p + start;
      // written <= p + start: an N-byte copy stays inside both buffers while p + start + N <= g.
      if (len <= 32 && p + start + 32 <= g) {
        store256(out + written, load256(src));
      } else if (p + start + 64 <= g) {
        store256(out + written, load256(src));
        store256(out + written + 32, load256(src + 32));
      } else {
        std::memcpy(out + written, src, len);
      }
      written += len;
      pos = start + len;
      literals = pos < 64 ? literals & (~uint64_t{0} << pos) : 0;
    }
    run += 64 - pos;
  }
  return reference::encode_rest(groups, p, g, out, written, run);
}

void zero_run_expand(const uint8_t* in, size_t length, size_t g, uint8_t* groups) {
  const __m256i first_run = _mm256_set1_epi8(static_cast<char>(kFirstRunByte));
  const __m128i zero16 = _mm_set1_epi8(static_cast<char>(kZeroGroup));
  size_t p = 0;
  size_t j = 0;
  while (p + 32 <= length) {
    const __m256i v = load256(in + p);
    // b >= 243 <=> max(b, 243) == b (unsigned).
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(v, first_run), v)) == 0) {
      store256(groups + j, v);  // 32 literals: 32 groups, inside g (validated tile)
      j += 32;
      p += 32;
      continue;
    }
    const size_t chunk_end = p + 32;
    for (; p < chunk_end && j + 16 <= g; ++p) {
      const uint8_t b = in[p];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(groups + j), zero16);
      groups[j] = simd::kExpand.value[b];
      j += simd::kExpand.advance[b];
    }
    if (p < chunk_end) break;
  }
  for (; p < length && j + 16 <= g; ++p) {
    const uint8_t b = in[p];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(groups + j), zero16);
    groups[j] = simd::kExpand.value[b];
    j += simd::kExpand.advance[b];
  }
  reference::expand_rest(in, p, length, j, groups);
}

// Trit masks of 8 group bytes (int32 lanes): pos[k] = -1 where trit k is 2, neg[k] = -1
// where it is 0.
inline void trit_masks(__m256i b, __m256i* pos, __m256i* neg) {
  static constexpr int kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  const __m256i all = _mm256_set1_epi32(-1);
  for (size_t k = 0; k < kTritsPerGroup; ++k) {
    const __m256i w = _mm256_set1_epi32(kWeight[k]);
    const __m256i ge1 = _mm256_cmpgt_epi32(b, _mm256_set1_epi32(kWeight[k] - 1));
    const __m256i ge2 = _mm256_cmpgt_epi32(b, _mm256_set1_epi32(2 * kWeight[k] - 1));
    pos[k] = ge2;
    neg[k] = _mm256_xor_si256(ge1, all);
    if (k + 1 < kTritsPerGroup) {
      b = _mm256_sub_epi32(b, _mm256_and_si256(ge1, w));
      b = _mm256_sub_epi32(b, _mm256_and_si256(ge2, w));
    }
  }
}

inline __m256i load_groups8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

void unpack_tile(const uint8_t* groups, size_t values, size_t g, float scale_f, float* dst) {
  const size_t full = values >= 4 * g ? values - 4 * g : 0;
  const __m256i scale = _mm256_castps_si256(_mm256_set1_ps(scale_f));
  const __m256i neg_scale = _mm256_castps_si256(_mm256_set1_ps(-scale_f));
  size_t j = 0;
  for (; j + 8 <= full; j += 8) {
    __m256i pos[kTritsPerGroup], neg[kTritsPerGroup];
    trit_masks(load_groups8(groups + j), pos, neg);
    for (size_t k = 0; k < kTritsPerGroup; ++k) {
      const __m256i v =
          _mm256_or_si256(_mm256_and_si256(pos[k], scale), _mm256_and_si256(neg[k], neg_scale));
      store256(dst + j + k * g, v);
    }
  }
  reference::unpack_groups(groups, values, g, scale_f, dst, j, g);
}

inline uint32_t movemask8(__m256i v) { return static_cast<uint32_t>(_mm256_movemask_epi8(v)); }

// Trit masks of 64 group bytes: pos[k] bit i where trit k of group i is 2, neg[k] where it is
// 0. Returns false (masks unset) when all 64 groups are zero groups.
inline bool chunk_trit_masks(const uint8_t* groups, uint64_t* pos, uint64_t* neg) {
  static constexpr uint8_t kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  const __m256i zero_group = _mm256_set1_epi8(static_cast<char>(kZeroGroup));
  __m256i lo = load256(groups);
  __m256i hi = load256(groups + 32);
  if ((movemask8(_mm256_cmpeq_epi8(lo, zero_group)) &
       movemask8(_mm256_cmpeq_epi8(hi, zero_group))) == 0xFFFFFFFFu) {
    return false;
  }
  for (size_t k = 0; k < kTritsPerGroup; ++k) {
    const __m256i w = _mm256_set1_epi8(static_cast<char>(kWeight[k]));
    const __m256i w2 = _mm256_set1_epi8(static_cast<char>(2 * kWeight[k]));
    // b >= w (unsigned) <=> max(b, w) == b.
    const __m256i ge1_lo = _mm256_cmpeq_epi8(_mm256_max_epu8(lo, w), lo);
    const __m256i ge1_hi = _mm256_cmpeq_epi8(_mm256_max_epu8(hi, w), hi);
    const __m256i ge2_lo = _mm256_cmpeq_epi8(_mm256_max_epu8(lo, w2), lo);
    const __m256i ge2_hi = _mm256_cmpeq_epi8(_mm256_max_epu8(hi, w2), hi);
    pos[k] = movemask8(ge2_lo) | uint64_t{movemask8(ge2_hi)} << 32;
    neg[k] = ~(movemask8(ge1_lo) | uint64_t{movemask8(ge1_hi)} << 32);
    if (k + 1 < kTritsPerGroup) {
      lo = _mm256_sub_epi8(lo, _mm256_and_si256(ge1_lo, w));
      lo = _mm256_sub_epi8(lo, _mm256_and_si256(ge2_lo, w));
      hi = _mm256_sub_epi8(hi, _mm256_and_si256(ge1_hi, w));
      hi = _mm256_sub_epi8(hi, _mm256_and_si256(ge2_hi, w));
    }
  }
  return true;
}

// Lane masks (-1 / 0) of the 8 low bits of `bits`.
inline __m256i lane_mask8(uint32_t bits) {
  const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), lanes),
                            lanes);
}

// Decodes chunks of 64 groups. Only values with a non-zero trit are read and written: one by
// one where a row of 64 holds few of them (a sparse gradient's updates are scattered; a
// vector at an unaligned address would pull in two cache lines for one value), with 8-lane
// vectors where it holds many.
void unpack_tile_add(const uint8_t* groups, size_t values, size_t g, float step_f, float* dst) {
  constexpr int kScalarMax = 6;
  const size_t full = values >= 4 * g ? values - 4 * g : 0;
  const size_t chunks = full / 64;
  const __m256 step = _mm256_set1_ps(step_f);
  const __m256 neg_step = _mm256_set1_ps(-step_f);
  const float neg_step_f = -step_f;
  for (size_t c = 0; c < chunks; ++c) {
    uint64_t pos[kTritsPerGroup], neg[kTritsPerGroup];
    if (!chunk_trit_masks(groups + 64 * c, pos, neg)) continue;  // 320 values untouched
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
      for (size_t q = 0; q < 8; ++q) {
        const uint32_t mq = static_cast<uint8_t>(nz >> (8 * q));
        if (mq == 0) continue;
        const uint32_t pq = static_cast<uint8_t>(pos[k] >> (8 * q));
        float* d = row + 8 * q;
        // All 8 lanes lie in this row of this tile; lanes outside mq are stored unchanged.
        const __m256 cur = _mm256_loadu_ps(d);
        const __m256 add = _mm256_blendv_ps(neg_step, step, _mm256_castsi256_ps(lane_mask8(pq)));
        _mm256_storeu_ps(
            d, _mm256_blendv_ps(cur, _mm256_add_ps(cur, add), _mm256_castsi256_ps(lane_mask8(mq))));
      }
    }
  }
  reference::unpack_add_groups(groups, values, g, step_f, dst, 64 * chunks, g);
}

void raw_add(const uint8_t* src, size_t n, float alpha_f, float* dst) {
  const __m256 alpha = _mm256_set1_ps(alpha_f);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 s0 =
        _mm256_mul_ps(alpha, _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i)));
    const __m256 s1 =
        _mm256_mul_ps(alpha, _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i + 32)));
    _mm256_storeu_ps(dst + i, _mm256_add_ps(_mm256_loadu_ps(dst + i), s0));
    _mm256_storeu_ps(dst + i + 8, _mm256_add_ps(_mm256_loadu_ps(dst + i + 8), s1));
  }
  ref::raw_add(src + 4 * i, n - i, alpha_f, dst + i);
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels kernels = {"avx2",          abs_max_bits, quantize_tile,   zero_run_encode,
                                  zero_run_expand, unpack_tile,  unpack_tile_add, raw_add};
  return kernels;
}

}  // namespace threelc::compression::detail
