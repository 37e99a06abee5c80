// The AVX2 (+BMI2) kernel set. Bit-identical to kernels_reference.h: the same fp32 operations
// in the same order, only 8 lanes at a time. The loops are kernels_simd_common.h's; this file
// gives them their AVX2 operations (struct Avx2). Compiled with its own -m flags
// (compression/CMakeLists.txt); dispatch.cc calls it only on CPUs that have them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels.h"
#include "kernels_simd_common.h"

namespace threelc::compression::detail {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline uint32_t movemask8(__m256i v) { return static_cast<uint32_t>(_mm256_movemask_epi8(v)); }

// One 8-group vector: quantizes x[j + k*g] (k = 0..4), updates e, returns the 8 group bytes
// as int32 lanes (121 + sum of weight * q, evaluated in Horner form).
// Not shared with AVX-512's quantize16: vector masks here (q = lt - gt), mask registers there.
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

// Trit masks of 8 group bytes (int32 lanes): pos[k] = -1 where trit k is 2, neg[k] = -1
// where it is 0.
// Not shared with AVX-512's: vector masks here, mask registers there.
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

// Lane masks (-1 / 0) of the 8 low bits of `bits`.
inline __m256i lane_mask8(uint32_t bits) {
  const __m256i lanes = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), lanes),
                            lanes);
}

// The AVX2 operations of kernels_simd_common.h's loops.
struct Avx2 {
  static constexpr size_t kLanes = 8;
  using Ps = __m256;
  using U32 = __m256i;
  struct Bytes64 {
    __m256i lo, hi;
  };
  using Bytes = __m256i;
  static constexpr size_t kBytes = 32;
  // scale, h and -h of one tile's quantization.
  struct Thresholds {
    __m256 scale, h, neg_h;
  };
  static constexpr bool kRawAddOneVectorLoop = false;  // pairs of vectors, then the scalar tail

  static __m256 set1_ps(float v) { return _mm256_set1_ps(v); }
  static Thresholds thresholds(float scale, float h) {
    return {set1_ps(scale), set1_ps(h), set1_ps(-h)};
  }
  static __m256 load_ps(const void* p) { return _mm256_loadu_ps(static_cast<const float*>(p)); }
  static void store_ps(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static __m256 add_ps(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 mul_ps(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }

  static __m256i zero_u32() { return _mm256_setzero_si256(); }
  static __m256i max_u32(__m256i a, __m256i b) { return _mm256_max_epu32(a, b); }
  static uint32_t hmax(__m256i m) {
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xB1));
    return static_cast<uint32_t>(_mm_cvtsi128_si32(h));
  }
  static __m256i abs_bits(const float* x) {
    return _mm256_and_si256(load256(x), _mm256_set1_epi32(0x7FFFFFFF));
  }
  static __m256i abs_bits(const float* x, const float* e) {
    const __m256 a = _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(e));
    return _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7FFFFFFF));
  }

  template <bool kHasError>
  static void quantize32(const float* x, float* e, size_t j, size_t g, const Thresholds& v,
                         uint8_t* out) {
    const __m256i b0 = quantize8<kHasError>(x, e, j, g, v.scale, v.h, v.neg_h);
    const __m256i b1 = quantize8<kHasError>(x, e, j + 8, g, v.scale, v.h, v.neg_h);
    const __m256i b2 = quantize8<kHasError>(x, e, j + 16, g, v.scale, v.h, v.neg_h);
    const __m256i b3 = quantize8<kHasError>(x, e, j + 24, g, v.scale, v.h, v.neg_h);
    // Lane-wise packs interleave 128-bit halves; the permute restores group order.
    const __m256i w01 = _mm256_packs_epi32(b0, b1);
    const __m256i w23 = _mm256_packs_epi32(b2, b3);
    const __m256i bytes = _mm256_packus_epi16(w01, w23);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    store256(out, _mm256_permutevar8x32_epi32(bytes, order));
  }
  template <bool kHasError>
  static void quantize_lanes(const float* x, float* e, size_t j, size_t g, const Thresholds& v,
                             uint8_t* out) {
    const __m256i b = quantize8<kHasError>(x, e, j, g, v.scale, v.h, v.neg_h);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(w, w));
  }

  static Bytes64 load64(const uint8_t* p) { return {load256(p), load256(p + 32)}; }
  static void store64(uint8_t* p, Bytes64 v) {
    store256(p, v.lo);
    store256(p + 32, v.hi);
  }
  static uint64_t zero_group_mask(Bytes64 v) {
    const __m256i zero_group = _mm256_set1_epi8(static_cast<char>(kZeroGroup));
    return movemask8(_mm256_cmpeq_epi8(v.lo, zero_group)) |
           (uint64_t{movemask8(_mm256_cmpeq_epi8(v.hi, zero_group))} << 32);
  }
  static void copy_literals(uint8_t* dst, const uint8_t* src, size_t len, size_t at, size_t g) {
    if (len <= 32 && at + 32 <= g) {
      store256(dst, load256(src));
    } else if (at + 64 <= g) {
      store256(dst, load256(src));
      store256(dst + 32, load256(src + 32));
    } else {
      std::memcpy(dst, src, len);
    }
  }

  static __m256i load_bytes(const uint8_t* p) { return load256(p); }
  static void store_bytes(uint8_t* p, __m256i v) { store256(p, v); }
  static bool all_literals(__m256i v) {
    // b >= 243 <=> max(b, 243) == b (unsigned).
    const __m256i first_run = _mm256_set1_epi8(static_cast<char>(kFirstRunByte));
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(v, first_run), v)) == 0;
  }

  // Inlined by force: GCC 12 would otherwise call it once per 8 groups.
  [[gnu::always_inline]] static void unpack_lanes(const uint8_t* groups, size_t g, __m256 scale_ps,
                                                  __m256 neg_scale_ps, float* dst) {
    const __m256i scale = _mm256_castps_si256(scale_ps);
    const __m256i neg_scale = _mm256_castps_si256(neg_scale_ps);
    __m256i pos[kTritsPerGroup], neg[kTritsPerGroup];
    trit_masks(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(groups))), pos,
               neg);
    for (size_t k = 0; k < kTritsPerGroup; ++k) {
      const __m256i v =
          _mm256_or_si256(_mm256_and_si256(pos[k], scale), _mm256_and_si256(neg[k], neg_scale));
      store256(dst + k * g, v);
    }
  }

  // Trit masks of 64 group bytes: pos[k] bit i where trit k of group i is 2, neg[k] where it is
  // 0. Returns false (masks unset) when all 64 groups are zero groups.
  // Not shared with AVX-512's: two 32-byte halves and movemask here, mask registers there.
  static bool chunk_trit_masks(const uint8_t* groups, uint64_t* pos, uint64_t* neg) {
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
  static uint32_t lane_bits(uint64_t bits, size_t q) {
    return static_cast<uint8_t>(bits >> (8 * q));
  }
  static void add_lanes(float* d, uint32_t mask, uint32_t pos, __m256 step, __m256 neg_step) {
    const __m256 cur = _mm256_loadu_ps(d);
    const __m256 add = _mm256_blendv_ps(neg_step, step, _mm256_castsi256_ps(lane_mask8(pos)));
    _mm256_storeu_ps(
        d, _mm256_blendv_ps(cur, _mm256_add_ps(cur, add), _mm256_castsi256_ps(lane_mask8(mask))));
  }
};

}  // namespace

const Kernels& avx2_kernels() {
  static constexpr Kernels kernels = simd::kernel_set<Avx2>("avx2");
  return kernels;
}

}  // namespace threelc::compression::detail
