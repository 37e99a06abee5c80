// Internal to gpu/: the elementwise steps of an allreduce of CUDA tensors around the codec,
// queued on `stream`, with the CPU's arithmetic (collectives/reduce_ops.h): fp16 / bf16 widened
// and narrowed by threelc/compression/float16.h's very code, fp64 rounded to nearest, scaling
// and averaging in fp32 without FMA. Each throws EngineError when the launch fails.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "element_type.h"

namespace threelc::engine::gpu {

// out[i] = float(in[i]) for fp32, fp16, bf16 and fp64 input.
void to_float32(ElementType type, const void* in, float* out, size_t count, cudaStream_t stream);
// out[i] = in[i] rounded to `type` (fp32, fp16, bf16, fp64).
void from_float32(ElementType type, const float* in, void* out, size_t count, cudaStream_t stream);
// data[i] *= factor (fp32).
void scale_float32(float* data, size_t count, float factor, cudaStream_t stream);
// data[i] /= divisor (fp32).
void divide_float32(float* data, size_t count, float divisor, cudaStream_t stream);

}  // namespace threelc::engine::gpu
