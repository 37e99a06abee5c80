// Internal to gpu/: the steps of THREELC_HIERARCHICAL inside a host (collectives/hierarchical.h)
// for device memory, over an NCCL communicator of the host's ranks, in place in the fused
// buffer. NCCL needs segments of one length: the caller pads the buffer to a multiple of the
// number of local ranks.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "collectives/hierarchical.h"
#include "gpu/nccl.h"

namespace threelc::engine::gpu {

class NcclLocalExchange : public LocalExchange {
 public:
  NcclLocalExchange(NcclComm& local, int local_rank, cudaStream_t stream)
      : local_(local), rank_(static_cast<size_t>(local_rank)), stream_(stream) {}

  std::span<const float> reduce_scatter(std::span<const float> values,
                                        std::span<const size_t> counts) override {
    const size_t count = equal_count(counts);
    float* segment = const_cast<float*>(values.data()) + rank_ * count;  // NCCL's in-place form
    local_.reduce_scatter(values.data(), segment, count, ElementType::kFloat32, ReduceOp::kSum,
                          stream_);
    return {segment, count};
  }

  void allgather(std::span<float> values, std::span<const size_t> counts) override {
    const size_t count = equal_count(counts);
    local_.allgather(values.data() + rank_ * count, values.data(), count, ElementType::kFloat32,
                     stream_);
  }

 private:
  static size_t equal_count(std::span<const size_t> counts) {
    for (size_t c : counts) {
      if (c != counts[0]) {
        throw std::logic_error("NcclLocalExchange: segments of " + std::to_string(counts[0]) +
                               " and " + std::to_string(c) + " elements (pad the buffer)");
      }
    }
    return counts.empty() ? 0 : counts[0];
  }

  NcclComm& local_;
  size_t rank_;
  cudaStream_t stream_;
};

}  // namespace threelc::engine::gpu
