// Internal to gpu/: what the background thread keeps per CUDA device across collectives: its
// own non-blocking stream, the fusion buffer, the residuals of compressed tensors, the CUDA
// codec's workspace, and the NCCL communicators once an allreduce needed them.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "error_feedback.h"
#include "gpu/device_memory.h"
#include "gpu/gpu.h"
#include "gpu/nccl.h"
#include "threelc/compression/cuda_codec.h"

namespace threelc::engine::gpu {

struct DeviceState {
  // Its residuals are saved and loaded with `store`'s (a holder of it while it lives).
  // Throws EngineError.
  DeviceState(int device_ordinal, ErrorFeedbackStore& store);
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
  ErrorFeedbackStore& feedback;          // the host's residuals, which loads leave for `residuals`
};

}  // namespace threelc::engine::gpu
