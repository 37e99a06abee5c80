#include <cstdint>

#include "gpu/cuda_error.h"
#include "gpu/elementwise.h"
#include "threelc/compression/float16.h"

namespace threelc::engine::gpu {
namespace {

namespace cc = threelc::compression;

constexpr int kThreads = 256;

unsigned blocks_for(size_t count) {
  const size_t blocks = (count + kThreads * 4 - 1) / (kThreads * 4);
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

// Calls body(i) for every i < count, grid-stride.
template <typename Body>
__global__ void for_each_kernel(size_t count, Body body) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    body(i);
  }
}

template <typename Body>
void for_each(size_t count, cudaStream_t stream, const char* what, Body body) {
  if (count == 0) return;
  for_each_kernel<<<blocks_for(count), kThreads, 0, stream>>>(count, body);
  check_cuda(cudaGetLastError(), what);
}

void unsupported(ElementType type) {
  throw EngineError(THREELC_EINTERNAL, std::string("CUDA allreduce: no float32 conversion of ") +
                                           element_type_name(type));
}

}  // namespace

void to_float32(ElementType type, const void* in, float* out, size_t count, cudaStream_t stream) {
  switch (type) {
    case ElementType::kFloat32:
      if (in != out && count > 0) {
        check_cuda(
            cudaMemcpyAsync(out, in, count * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            "copying into the fusion buffer");
      }
      return;
    case ElementType::kFloat16: {
      const auto* h = static_cast<const uint16_t*>(in);
      for_each(count, stream, "fp16 to fp32",
               [=] __device__(size_t i) { out[i] = cc::half_to_float(h[i]); });
      return;
    }
    case ElementType::kBFloat16: {
      const auto* b = static_cast<const uint16_t*>(in);
      for_each(count, stream, "bf16 to fp32",
               [=] __device__(size_t i) { out[i] = cc::bfloat16_to_float(b[i]); });
      return;
    }
    case ElementType::kFloat64: {
      const auto* d = static_cast<const double*>(in);
      for_each(count, stream, "fp64 to fp32",
               [=] __device__(size_t i) { out[i] = __double2float_rn(d[i]); });
      return;
    }
    default:
      unsupported(type);
  }
}

void from_float32(ElementType type, const float* in, void* out, size_t count, cudaStream_t stream) {
  switch (type) {
    case ElementType::kFloat32:
      if (in != out && count > 0) {
        check_cuda(
            cudaMemcpyAsync(out, in, count * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            "copying out of the fusion buffer");
      }
      return;
    case ElementType::kFloat16: {
      auto* h = static_cast<uint16_t*>(out);
      for_each(count, stream, "fp32 to fp16",
               [=] __device__(size_t i) { h[i] = cc::float_to_half(in[i]); });
      return;
    }
    case ElementType::kBFloat16: {
      auto* b = static_cast<uint16_t*>(out);
      for_each(count, stream, "fp32 to bf16",
               [=] __device__(size_t i) { b[i] = cc::float_to_bfloat16(in[i]); });
      return;
    }
    case ElementType::kFloat64: {
      auto* d = static_cast<double*>(out);
      for_each(count, stream, "fp32 to fp64",
               [=] __device__(size_t i) { d[i] = static_cast<double>(in[i]); });
      return;
    }
    default:
      unsupported(type);
  }
}

void scale_float32(float* data, size_t count, float factor, cudaStream_t stream) {
  for_each(count, stream, "scaling",
           [=] __device__(size_t i) { data[i] = __fmul_rn(data[i], factor); });
}

void divide_float32(float* data, size_t count, float divisor, cudaStream_t stream) {
  for_each(count, stream, "averaging",
           [=] __device__(size_t i) { data[i] = __fdiv_rn(data[i], divisor); });
}

}  // namespace threelc::engine::gpu
