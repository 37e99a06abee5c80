// Internal: exact widening of fp16 and bf16 values to fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "threelc/compression/codec.h"

namespace threelc::compression::detail {

// dst[i] = float(src[i]) for n values of `dtype` starting at value index `offset`.
void widen(DType dtype, const void* src, size_t offset, size_t n, float* dst);

}  // namespace threelc::compression::detail
