// The AVX-512 (F/BW/VL/DQ) kernel set. Bit-identical to kernels_reference.h: the same fp32
// operations in the same order, only 16 lanes at a time. The loops are kernels_simd_common.h's;
// this file gives them their AVX-512 operations (struct Avx512). Compiled with its own -m flags
// (compression/CMakeLists.txt); dispatch.cc calls it only on CPUs that have them.
#include <immintrin.h>

#include <cstdint>

#include "kernels.h"
#include "kernels_simd_common.h"

namespace threelc::compression::detail {
namespace {

// GCC 12's unmasked forms of these pass an "undefined" vector that -Wmaybe-uninitialized
// flags; the zero-masked forms with a full mask compile to the same instructions.
inline __m512i widen_u8(__m128i v) { return _mm512_maskz_cvtepu8_epi32(0xFFFF, v); }
inline __m128i narrow_u8(__m512i v) { return _mm512_maskz_cvtepi32_epi8(0xFFFF, v); }

// One 16-group vector of a tile: quantizes x[j + k*g] (k = 0..4), updates e, returns the
// 16 group bytes as int32 lanes.
// Not shared with AVX2's quantize8: mask registers add the weights here, vector masks there.
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

// Trit masks of 16 group bytes (int32 lanes): pos[k] where trit k is 2, neg[k] where it is 0.
// Not shared with AVX2's: mask registers here, vector masks there.
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

// The AVX-512 operations of kernels_simd_common.h's loops.
struct Avx512 {
  static constexpr size_t kLanes = 16;
  using Ps = __m512;
  using U32 = __m512i;
  using Bytes64 = __m512i;
  using Bytes = __m512i;
  static constexpr size_t kBytes = 64;
  // scale, h and -h of one tile's quantization.
  struct Thresholds {
    __m512 scale, h, neg_h;
  };
  static constexpr bool kRawAddOneVectorLoop = true;  // pairs, one vector, the scalar tail

  static __m512 set1_ps(float v) { return _mm512_set1_ps(v); }
  static Thresholds thresholds(float scale, float h) {
    return {set1_ps(scale), set1_ps(h), set1_ps(-h)};
  }
  static __m512 load_ps(const void* p) { return _mm512_loadu_ps(p); }
  static void store_ps(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  static __m512 add_ps(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 mul_ps(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }

  static __m512i zero_u32() { return _mm512_setzero_si512(); }
  static __m512i max_u32(__m512i a, __m512i b) { return _mm512_maskz_max_epu32(0xFFFF, a, b); }
  static uint32_t hmax(__m512i v) {
    alignas(64) uint32_t lanes[16];
    _mm512_store_si512(lanes, v);
    uint32_t m = 0;
    for (uint32_t lane : lanes) m = lane > m ? lane : m;
    return m;
  }
  static __m512i abs_bits(const float* x) {
    return _mm512_and_si512(_mm512_loadu_si512(x), _mm512_set1_epi32(0x7FFFFFFF));
  }
  static __m512i abs_bits(const float* x, const float* e) {
    const __m512 a = _mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(e));
    return _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7FFFFFFF));
  }

  template <bool kHasError>
  static void quantize32(const float* x, float* e, size_t j, size_t g, const Thresholds& v,
                         uint8_t* out) {
    const __m512i b0 = quantize16<kHasError>(x, e, j, g, v.scale, v.h, v.neg_h);
    const __m512i b1 = quantize16<kHasError>(x, e, j + 16, g, v.scale, v.h, v.neg_h);
    const __m256i packed =
        _mm256_inserti128_si256(_mm256_castsi128_si256(narrow_u8(b0)), narrow_u8(b1), 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
  }
  template <bool kHasError>
  static void quantize_lanes(const float* x, float* e, size_t j, size_t g, const Thresholds& v,
                             uint8_t* out) {
    const __m512i b = quantize16<kHasError>(x, e, j, g, v.scale, v.h, v.neg_h);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), narrow_u8(b));
  }

  static __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static void store64(uint8_t* p, __m512i v) { _mm512_storeu_si512(p, v); }
  static uint64_t zero_group_mask(__m512i v) {
    return _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(static_cast<char>(kZeroGroup)));
  }
  static void copy_literals(uint8_t* dst, const uint8_t* src, size_t len, size_t /*at*/,
                            size_t /*g*/) {
    const __mmask64 m = _bzhi_u64(~uint64_t{0}, static_cast<unsigned>(len));
    _mm512_mask_storeu_epi8(dst, m, _mm512_maskz_loadu_epi8(m, src));
  }

  static __m512i load_bytes(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static void store_bytes(uint8_t* p, __m512i v) { _mm512_storeu_si512(p, v); }
  static bool all_literals(__m512i v) {
    return _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8(static_cast<char>(kFirstRunByte))) == 0;
  }

  static void unpack_lanes(const uint8_t* groups, size_t g, __m512 scale, __m512 neg_scale,
                           float* dst) {
    const __m512 zero = _mm512_setzero_ps();
    const __m512i b = widen_u8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(groups)));
    __mmask16 pos[kTritsPerGroup], neg[kTritsPerGroup];
    trit_masks(b, pos, neg);
    for (size_t k = 0; k < kTritsPerGroup; ++k) {
      const __m512 v =
          _mm512_mask_mov_ps(_mm512_mask_mov_ps(zero, neg[k], neg_scale), pos[k], scale);
      _mm512_storeu_ps(dst + k * g, v);
    }
  }

  // Trit masks of 64 group bytes: pos[k] bit i where trit k of group i is 2, neg[k] where it is
  // 0. Returns false (masks unset) when all 64 groups are zero groups.
  // Not shared with AVX2's: one 64-byte vector and mask registers here, movemask there.
  static bool chunk_trit_masks(const uint8_t* groups, uint64_t* pos, uint64_t* neg) {
    static constexpr uint8_t kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
    __m512i b = _mm512_loadu_si512(groups);
    if (_mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8(static_cast<char>(kZeroGroup))) ==
        ~uint64_t{0}) {
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
  static __mmask16 lane_bits(uint64_t bits, size_t q) {
    return static_cast<__mmask16>(bits >> (16 * q));
  }
  static void add_lanes(float* d, __mmask16 mask, __mmask16 pos, __m512 step, __m512 neg_step) {
    const __m512 cur = _mm512_loadu_ps(d);
    const __m512 add = _mm512_mask_mov_ps(neg_step, pos, step);
    _mm512_storeu_ps(d, _mm512_mask_add_ps(cur, mask, cur, add));
  }
};

}  // namespace

const Kernels& avx512_kernels() {
  static constexpr Kernels kernels = simd::kernel_set<Avx512>("avx512");
  return kernels;
}

}  // namespace threelc::compression::detail
