// Elementwise kernels over raw bytes for every ElementType: the reductions of the uncompressed
// collectives, scaling (prescale / postscale), averaging, identities and the fp16 / bf16 / fp64
// conversions to and from fp32. Plain scalar code: correctness and determinism first.
//
// Buffers are untyped and need no particular alignment (values are loaded and stored with
// memcpy). Every function throws std::invalid_argument for an ElementType or ReduceOp outside
// the enums.
#pragma once

#include "threelc/compression/float16.h"

#include <cstddef>
#include <cstdint>

#include "element_type.h"

namespace threelc::engine {

// acc[i] = acc[i] op in[i] for i < count. kAverage reduces as kSum (the caller divides).
// - fp16 / bf16: computed in fp32 and rounded back to nearest, ties to even.
// - integers: sum and product wrap modulo 2^bits (as unsigned arithmetic; no overflow UB).
// - float min / max propagate NaN (acc keeps its NaN; a NaN in `in` replaces acc); otherwise
//   acc changes only when `in` is strictly smaller (min) or larger (max).
void reduce_into(ElementType type, ReduceOp op, void* acc, const void* in, size_t count);

// data[i] *= factor. Floats: in the type's precision (fp64 in double; fp32, fp16 and bf16 in
// float, fp16 / bf16 rounded back to nearest even). Integers: in double, truncated toward zero
// and saturated to the type's range (NaN gives 0). factor == 1.0 leaves data untouched.
void scale_values(ElementType type, void* data, size_t count, double factor);

// data[i] /= divisor (averaging). Floats divide in the type's precision as scale_values
// multiplies; integers use truncating division (INT64_MIN / -1 wraps to INT64_MIN). Throws
// std::invalid_argument when divisor is 0.
void divide_values(ElementType type, void* data, size_t count, int64_t divisor);

// The identity of `op` in every element: 0 for sum / average, 1 for product, the type's
// largest value for min (+inf for floats), its smallest for max (-inf for floats).
void fill_identity(ElementType type, ReduceOp op, void* data, size_t count);

// Float types only (std::invalid_argument otherwise). to_float32 widens fp16 / bf16 exactly and
// rounds fp64 to nearest; from_float32 rounds to fp16 / bf16 to nearest even (subnormals,
// overflow to inf, NaN stays NaN) and widens to fp64 exactly.
void to_float32(ElementType type, const void* in, float* out, size_t count);
void from_float32(ElementType type, const float* in, void* out, size_t count);

// One value (the codec's conversions, threelc/compression/float16.h).
using compression::bfloat16_to_float;
using compression::float_to_bfloat16;
using compression::float_to_half;
using compression::half_to_float;

}  // namespace threelc::engine
