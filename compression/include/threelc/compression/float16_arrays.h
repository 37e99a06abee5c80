// Conversions of whole arrays between IEEE binary16 and fp32, with the same bits as
// half_to_float / float_to_half of float16.h (signalling NaNs included): with the CPU's F16C
// instructions where the codec's ISA (Isa::kAuto: the detected one, THREELC_CODEC_ISA) is
// AVX2 or AVX-512 and the CPU has F16C, else one value at a time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "threelc/compression/codec.h"

namespace threelc::compression {

void halves_to_floats(const uint16_t* in, float* out, size_t count, Isa isa = Isa::kAuto);
void floats_to_halves(const float* in, uint16_t* out, size_t count, Isa isa = Isa::kAuto);

}  // namespace threelc::compression
