#include "gpu/device_block_codec.h"

#include <vector>

#include "gpu/cuda_error.h"

namespace threelc::engine::gpu {

namespace cc = threelc::compression;

cc::Status DeviceBlockCodec::encode(const float* values, size_t count, float* residual,
                                    const cc::EncodeOptions* quantize, std::span<uint8_t> out,
                                    cc::EncodedBlock* result) {
  if (quantize != nullptr) {
    return cc::cuda::encode_to_host(cc::cuda::DeviceValues{values, cc::DType::kFloat32, count},
                                    residual, *quantize, workspace_, stream_, out, result);
  }
  // Raw blocks (push_pull without compression, for tests): the values through host memory.
  std::vector<float> host(count);
  if (count > 0) {
    check_cuda(cudaMemcpyAsync(host.data(), values, count * sizeof(float), cudaMemcpyDeviceToHost,
                               stream_),
               "copying a raw block's values to the host");
    check_cuda(cudaStreamSynchronize(stream_), "waiting for a raw block's values");
  }
  return cc::encode_raw(cc::Values{host.data(), cc::DType::kFloat32, count}, out, result);
}

cc::Status DeviceBlockCodec::decode(std::span<const uint8_t> block, size_t count, bool add,
                                    float* dst) {
  return add ? cc::cuda::decode_add_from_host(block, count, 1.0f, dst, workspace_, stream_)
             : cc::cuda::decode_from_host(block, count, dst, workspace_, stream_);
}

void DeviceBlockCodec::copy(float* dst, const float* src, size_t count) {
  if (count == 0 || dst == src) return;
  check_cuda(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
             "copying a segment on the device");
}

}  // namespace threelc::engine::gpu
