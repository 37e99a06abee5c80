// The AVX-512 (F/BW/VL/DQ) kernel set. Bit-identical to kernels_reference.h: the same fp32
// operations in the same order, only 16 lanes at a time. Compiled with its own -m flags
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

// GCC 12's unmasked forms of these pass an "undefined" vector that -Wmaybe-uninitialized
// flags; the zero-masked forms with a full mask compile to the same instructions.
inline __m512i max_u32(__m512i a, __m512i b) { return _mm512_maskz_max_epu32(0xFFFF, a, b); }
inline __m512i widen_u8(__m128i v) { return _mm512_maskz_cvtepu8_epi32(0xFFFF, v); }
inline __m128i narrow_u8(__m512i v) { return _mm512_maskz_cvtepi32_epi8(0xFFFF, v); }

inline uint32_t hmax(__m512i v) {
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, v);
  uint32_t m = 0;
  for (uint32_t lane : lanes) m = lane > m ? lane : m;
  return m;
}

uint32_t abs_max_bits(const float* x, const float* e, size_t n) {
  const __m512i mask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  if (e != nullptr) {
    for (; i + 64 <= n; i += 64) {
      const __m512 a0 = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(e + i));
      const __m512 a1 = _mm512_add_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(e + i + 16));
      const __m512 a2 = _mm512_add_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(e + i + 32));
      const __m512 a3 = _mm512_add_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(e + i + 48));
      m0 = max_u32(m0, _mm512_and_si512(_mm512_castps_si512(a0), mask));
      m1 = max_u32(m1, _mm512_and_si512(_mm512_castps_si512(a1), mask));
      m2 = max_u32(m2, _mm512_and_si512(_mm512_castps_si512(a2), mask));
      m3 = max_u32(m3, _mm512_and_si512(_mm512_castps_si512(a3), mask));
    }
  } else {
    for (; i + 64 <= n; i += 64) {
      m0 = max_u32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), mask));
      m1 = max_u32(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), mask));
      m2 = max_u32(m2, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), mask));
      m3 = max_u32(m3, _mm512_and_si512(_mm512_loadu_si512(x + i + 48), mask));
    }
  }
  const uint32_t vmax = hmax(max_u32(max_u32(m0, m1), max_u32(m2, m3)));
  const uint32_t tmax = ref::abs_max_bits(x + i, e != nullptr ? e + i : nullptr, n - i);
  return vmax > tmax ? vmax : tmax;
}

// One 16-group vector of a tile: quantizes x[j + k*g] (k = 0..4), updates e, returns the
// 16 group bytes as int32 lanes.
template <bool kHasError>
inline __m512i quantize16(const float* x, float* e, size_t j, size_t g, __m512 scale, __m512 h,
                          __m512 neg_h) {
  static constexpr int kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  __m512i acc = _mm512_set1_epi32(kZeroGroup);
  for (size_t k = 0; k < kTritsPerGroup; ++k) {
    const size_t i = j + k * g;
    __m512 a = _mm512_loadu_ps(x + i);
    if constexpr (kHasError) a = _mm512_add_ps(a, _mm512_loadu_ps(e + i));
    const __mmask16 gt = _mm512_cmp_ps_mask(a, h, _CMP_GT_OQ);
    const __mmask16 lt = _mm512_cmp_ps_mask(a, neg_h, _CMP_LT_OQ);
    const __m512i w = _mm512_set1_epi32(kWeight[k]);
    acc = _mm512_mask_add_epi32(acc, gt, acc, w);
    acc = _mm512_mask_sub_epi32(acc, lt, acc, w);
    if constexpr (kHasError) {
      __m512 r = _mm512_mask_sub_ps(a, gt, a, scale);
      r = _mm512_mask_add_ps(r, lt, a, scale);
      _mm512_storeu_ps(e + i, r);
    }
  }
  return acc;
}

template <bool kHasError>
size_t quantize_main(const float* x, float* e, size_t j, size_t end, size_t g, float scale_f,
                     float h_f, uint8_t* groups) {
  const __m512 scale = _mm512_set1_ps(scale_f);
  const __m512 h = _mm512_set1_ps(h_f);
  const __m512 neg_h = _mm512_set1_ps(-h_f);
  for (; j + 32 <= end; j += 32) {
    const __m512i b0 = quantize16<kHasError>(x, e, j, g, scale, h, neg_h);
    const __m512i b1 = quantize16<kHasError>(x, e, j + 16, g, scale, h, neg_h);
    const __m256i packed =
        _mm256_inserti128_si256(_mm256_castsi128_si256(narrow_u8(b0)), narrow_u8(b1), 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(groups + j), packed);
  }
  for (; j + 16 <= end; j += 16) {
    const __m512i b = quantize16<kHasError>(x, e, j, g, scale, h, neg_h);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(groups + j), narrow_u8(b));
  }
  return j;
}

void quantize_tile(const float* x, float* e, size_t values, size_t g, float scale, float h,
                   uint8_t* groups) {
  // Groups whose five elements are all in range: j < values - 4g.
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
  const __m512i zero_group = _mm512_set1_epi8(static_cast<char>(kZeroGroup));
  size_t written = 0;
  size_t run = 0;
  size_t p = 0;
  for (; p + 64 <= g; p += 64) {
    const __m512i v = _mm512_loadu_si512(groups + p);
    const uint64_t zeros = _mm512_cmpeq_epi8_mask(v, zero_group);
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
      _mm512_storeu_si512(out + written, v);
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
      const __mmask64 m = _bzhi_u64(~uint64_t{0}, static_cast<unsigned>(len));
      _mm512_mask_storeu_epi8(out + written, m, _mm512_maskz_loadu_epi8(m, groups + p + start));
      written += len;
      pos = start + len;
      literals = pos < 64 ? literals & (~uint64_t{0} << pos) : 0;
    }
    run += 64 - pos;
  }
  return reference::encode_rest(groups, p, g, out, written, run);
}

void zero_run_expand(const uint8_t* in, size_t length, size_t g, uint8_t* groups) {
  const __m512i first_run = _mm512_set1_epi8(static_cast<char>(kFirstRunByte));
  const __m128i zero16 = _mm_set1_epi8(static_cast<char>(kZeroGroup));
  size_t p = 0;
  size_t j = 0;
  while (p + 64 <= length) {
    const __m512i v = _mm512_loadu_si512(in + p);
    if (_mm512_cmpge_epu8_mask(v, first_run) == 0) {
      // 64 literals: 64 groups, inside g because the tile was validated.
      _mm512_storeu_si512(groups + j, v);
      j += 64;
      p += 64;
      continue;
    }
    const size_t chunk_end = p + 64;
    for (; p < chunk_end && j + 16 <= g; ++p) {
      // Write 16 zero groups, then the literal (or another zero group) at j; the next byte
      // overwrites from its own start, so every group ends as its own byte says.
      const uint8_t b = in[p];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(groups + j), zero16);
      groups[j] = simd::kExpand.value[b];
      j += simd::kExpand.advance[b];
    }
    if (p < chunk_end) break;  // near the end of the groups: finish exactly
  }
  for (; p < length && j + 16 <= g; ++p) {
    const uint8_t b = in[p];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(groups + j), zero16);
    groups[j] = simd::kExpand.value[b];
    j += simd::kExpand.advance[b];
  }
  reference::expand_rest(in, p, length, j, groups);
}

// Trit masks of 16 group bytes (int32 lanes): pos[k] where trit k is 2, neg[k] where it is 0.
inline void trit_masks(__m512i b, __mmask16* pos, __mmask16* neg) {
  static constexpr unsigned kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  for (size_t k = 0; k < kTritsPerGroup; ++k) {
    const __m512i w = _mm512_set1_epi32(static_cast<int>(kWeight[k]));
    const __m512i w2 = _mm512_set1_epi32(static_cast<int>(2 * kWeight[k]));
    const __mmask16 ge1 = _mm512_cmpge_epu32_mask(b, w);
    const __mmask16 ge2 = _mm512_cmpge_epu32_mask(b, w2);
    pos[k] = ge2;
    neg[k] = static_cast<__mmask16>(~ge1);
    if (k + 1 < kTritsPerGroup) {
      b = _mm512_mask_sub_epi32(b, ge1, b, w);
      b = _mm512_mask_sub_epi32(b, ge2, b, w);
    }
  }
}

void unpack_tile(const uint8_t* groups, size_t values, size_t g, float scale_f, float* dst) {
  const size_t full = values >= 4 * g ? values - 4 * g : 0;
  const __m512 scale = _mm512_set1_ps(scale_f);
  const __m512 neg_scale = _mm512_set1_ps(-scale_f);
  const __m512 zero = _mm512_setzero_ps();
  size_t j = 0;
  for (; j + 16 <= full; j += 16) {
    const __m512i b = widen_u8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(groups + j)));
    __mmask16 pos[kTritsPerGroup], neg[kTritsPerGroup];
    trit_masks(b, pos, neg);
    for (size_t k = 0; k < kTritsPerGroup; ++k) {
      const __m512 v =
          _mm512_mask_mov_ps(_mm512_mask_mov_ps(zero, neg[k], neg_scale), pos[k], scale);
      _mm512_storeu_ps(dst + j + k * g, v);
    }
  }
  reference::unpack_groups(groups, values, g, scale_f, dst, j, g);
}

// Trit masks of 64 group bytes: pos[k] bit i where trit k of group i is 2, neg[k] where it is
// 0. Returns false (masks unset) when all 64 groups are zero groups.
inline bool chunk_trit_masks(const uint8_t* groups, uint64_t* pos, uint64_t* neg) {
  static constexpr uint8_t kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  __m512i b = _mm512_loadu_si512(groups);
  if (_mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(static_cast<char>(kZeroGroup))) == ~uint64_t{0}) {
    return false;
  }
  for (size_t k = 0; k < kTritsPerGroup; ++k) {
    const __m512i w = _mm512_set1_epi8(static_cast<char>(kWeight[k]));
    const __m512i w2 = _mm512_set1_epi8(static_cast<char>(2 * kWeight[k]));
    const __mmask64 ge1 = _mm512_cmpge_epu8_mask(b, w);
    const __mmask64 ge2 = _mm512_cmpge_epu8_mask(b, w2);
    pos[k] = ge2;
    neg[k] = ~ge1;
    if (k + 1 < kTritsPerGroup) {
      b = _mm512_mask_sub_epi8(b, ge1, b, w);
      b = _mm512_mask_sub_epi8(b, ge2, b, w);
    }
  }
  return true;
}

// Decodes chunks of 64 groups. Only values with a non-zero trit are read and written: one by
// one where a row of 64 holds few of them (a sparse gradient's updates are scattered; a
// 64-byte vector at an unaligned address would pull in two cache lines for one value), with
// 16-lane vectors where it holds many.
void unpack_tile_add(const uint8_t* groups, size_t values, size_t g, float step_f, float* dst) {
  constexpr int kScalarMax = 6;
  const size_t full = values >= 4 * g ? values - 4 * g : 0;
  const size_t chunks = full / 64;
  const __m512 step = _mm512_set1_ps(step_f);
  const __m512 neg_step = _mm512_set1_ps(-step_f);
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
      for (size_t q = 0; q < 4; ++q) {
        const __mmask16 mq = static_cast<__mmask16>(nz >> (16 * q));
        if (mq == 0) continue;
        const __mmask16 pq = static_cast<__mmask16>(pos[k] >> (16 * q));
        float* d = row + 16 * q;
        // All 16 lanes lie in this row of this tile; lanes outside mq are stored unchanged.
        const __m512 cur = _mm512_loadu_ps(d);
        const __m512 add = _mm512_mask_mov_ps(neg_step, pq, step);
        _mm512_storeu_ps(d, _mm512_mask_add_ps(cur, mq, cur, add));
      }
    }
  }
  reference::unpack_add_groups(groups, values, g, step_f, dst, 64 * chunks, g);
}

void raw_add(const uint8_t* src, size_t n, float alpha_f, float* dst) {
  const __m512 alpha = _mm512_set1_ps(alpha_f);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 s0 = _mm512_mul_ps(alpha, _mm512_loadu_ps(src + 4 * i));
    const __m512 s1 = _mm512_mul_ps(alpha, _mm512_loadu_ps(src + 4 * i + 64));
    _mm512_storeu_ps(dst + i, _mm512_add_ps(_mm512_loadu_ps(dst + i), s0));
    _mm512_storeu_ps(dst + i + 16, _mm512_add_ps(_mm512_loadu_ps(dst + i + 16), s1));
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 s = _mm512_mul_ps(alpha, _mm512_loadu_ps(src + 4 * i));
    _mm512_storeu_ps(dst + i, _mm512_add_ps(_mm512_loadu_ps(dst + i), s));
  }
  ref::raw_add(src + 4 * i, n - i, alpha_f, dst + i);
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels kernels = {"avx512",        abs_max_bits, quantize_tile,   zero_run_encode,
                                  zero_run_expand, unpack_tile,  unpack_tile_add, raw_add};
  return kernels;
}

}  // namespace threelc::compression::detail
