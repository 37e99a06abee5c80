#include "threelc/compression/float16_arrays.h"

#include <cpuid.h>
#include <immintrin.h>

#include "threelc/compression/float16.h"

namespace threelc::compression {

namespace {

// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool cpuid_has_f16c() {
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

bool use_f16c(Isa isa) {
  static const bool cpu_has_f16c = __builtin_cpu_supports("avx2") && cpuid_has_f16c();
  if (isa == Isa::kAuto) isa = detected_isa();
  return cpu_has_f16c && (isa == Isa::kAvx2 || isa == Isa::kAvx512);
}

__attribute__((target("avx2,f16c"))) void halves_to_floats_f16c(const uint16_t* in, float* out,
                                                                size_t count) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFF);
  const __m256i infinity = _mm256_set1_epi32(0x7C00);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256 floats = _mm256_cvtph_ps(halves);
    // The instruction makes a signalling NaN quiet; half_to_float keeps it as it is, so NaN
    // lanes take half_to_float's bits: sign, all-ones exponent, the payload shifted up.
    const __m256i wide = _mm256_cvtepu16_epi32(halves);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(wide, magnitude), infinity);
    if (_mm256_testz_si256(is_nan, is_nan) == 0) {
      const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x8000)), 16);
      const __m256i payload =
          _mm256_slli_epi32(_mm256_and_si256(wide, _mm256_set1_epi32(0x3FF)), 13);
      const __m256i nan_bits =
          _mm256_or_si256(_mm256_or_si256(sign, payload), _mm256_set1_epi32(0x7F800000));
      floats = _mm256_blendv_ps(floats, _mm256_castsi256_ps(nan_bits), _mm256_castsi256_ps(is_nan));
    }
    _mm256_storeu_ps(out + i, floats);
  }
  for (; i < count; ++i) out[i] = half_to_float(in[i]);
}

__attribute__((target("avx2,f16c"))) void floats_to_halves_f16c(const float* in, uint16_t* out,
                                                                size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    // Round to nearest even; a NaN comes out quiet with its top payload bits, as float_to_half.
    const __m128i halves =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), halves);
  }
  for (; i < count; ++i) out[i] = float_to_half(in[i]);
}

}  // namespace

void halves_to_floats(const uint16_t* in, float* out, size_t count, Isa isa) {
  if (use_f16c(isa)) return halves_to_floats_f16c(in, out, count);
  for (size_t i = 0; i < count; ++i) out[i] = half_to_float(in[i]);
}

void floats_to_halves(const float* in, uint16_t* out, size_t count, Isa isa) {
  if (use_f16c(isa)) return floats_to_halves_f16c(in, out, count);
  for (size_t i = 0; i < count; ++i) out[i] = float_to_half(in[i]);
}

}  // namespace threelc::compression
