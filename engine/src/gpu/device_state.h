// Internal to gpu/: what the background thread keeps per CUDA device across collectives: its
// own non-blocking stream, the fusion buffer, the residuals of compressed tensors, the CUDA
// codec's workspace, and the NCCL communicators once an allreduce needed them.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "gpu/device_memory.h"
#include "gpu/gpu.h"
#include "gpu/nccl.h"
#include "threelc/compression/cuda_codec.h"

namespace threelc::engine::gpu {

struct DeviceState {
  explicit DeviceState(int device_ordinal);  // throws EngineError
  ~DeviceState();
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  int device;
  cudaStream_t stream = nullptr;
  DeviceBuffer fusion;
  DeviceResiduals residuals;
  compression::cuda::Workspace workspace;
  std::unique_ptr<NcclComm> nccl;
  std::unique_ptr<NcclComm> local_nccl;  // THREELC_HIERARCHICAL: among this host's ranks
};

}  // namespace threelc::engine::gpu
