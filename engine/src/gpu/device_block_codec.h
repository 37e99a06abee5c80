// Internal to gpu/: push_pull's BlockCodec on device memory, with the CUDA codec. Blocks come
// to and from host memory (the transport's): only compressed bytes cross PCIe. Work is ordered
// on one stream; an encode returns once its block is in host memory.
#pragma once

#include <cuda_runtime.h>

#include "collectives/block_codec.h"
#include "threelc/compression/cuda_codec.h"

namespace threelc::engine::gpu {

class DeviceBlockCodec final : public BlockCodec {
 public:
  DeviceBlockCodec(compression::cuda::Workspace& workspace, cudaStream_t stream)
      : workspace_(workspace), stream_(stream) {}

  bool host_values() const override { return false; }
  compression::Status encode(const float* values, size_t count, float* residual,
                             const compression::EncodeOptions* quantize, std::span<uint8_t> out,
                             compression::EncodedBlock* result) override;
  compression::Status decode(std::span<const uint8_t> block, size_t count, bool add,
                             float* dst) override;
  void copy(float* dst, const float* src, size_t count) override;

 private:
  compression::cuda::Workspace& workspace_;
  cudaStream_t stream_;
};

}  // namespace threelc::engine::gpu
