// Internal to gpu/: the ValueSpace of one CUDA device's tensors, on the background thread's
// stream of that device: the CUDA codec (only 3LC blocks cross PCIe to the host transport),
// the device's fusion buffer and residuals, the elementwise kernels, and NCCL among the host's
// ranks for THREELC_HIERARCHICAL (its segments must be of one length: buffers are padded).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "collectives/rank_subset.h"
#include "gpu/device_block_codec.h"
#include "gpu/device_state.h"
#include "gpu/nccl_local_exchange.h"
#include "runtime/value_space.h"

namespace threelc::engine::gpu {

class DeviceValues final : public ValueSpace {
 public:
  // How the NCCL communicator among this host's ranks is made on first use; `local` null
  // (no THREELC_HIERARCHICAL) or `nccl` false: the allreduce runs flat.
  struct LocalNccl {
    RankSubset* local = nullptr;
    int local_index = 0;
    bool nccl = false;
    std::string library;                  // empty: libnccl.so.2
    std::chrono::milliseconds timeout{};  // THREELC_TIMEOUT (ExecutorOptions)
    uint32_t tag = 0;                     // of the communicator's unique id
  };
  DeviceValues(DeviceState& device, const LocalNccl& local_nccl);

  BlockCodec& codec() override { return codec_; }
  std::byte* fusion_buffer(size_t bytes) override;
  // NCCL's reduce-scatter takes equal segments.
  size_t padded(size_t count, size_t parts) const override {
    return (count + parts - 1) / parts * parts;
  }
  void convert(ElementType from, const void* src, ElementType to, void* dst, size_t count) override;
  void zero(float* dst, size_t count) override;
  void scale(ElementType type, void* values, size_t count, double factor) override;
  void divide(ElementType type, void* values, size_t count, int divisor) override;
  float* residual(const std::string& name, size_t count) override;
  LocalExchange* local_exchange(CollectiveObserver* observer) override;
  void finish() override;

 private:
  DeviceState& device_;
  LocalNccl local_nccl_;
  DeviceBlockCodec codec_;
  std::optional<NcclLocalExchange> exchange_;
};

}  // namespace threelc::engine::gpu
