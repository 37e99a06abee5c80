// The engine's GPU support as the rest of the engine sees it, without CUDA headers: whether
// CUDA tensors can be used here, the ready event of a submitted CUDA tensor, and the background
// thread's per-device state (device_state.h, in a build with CUDA). A build without nvcc links
// no_cuda.cc instead, whose functions say why not.
#pragma once

#include <memory>
#include <string>

namespace threelc::engine::gpu {

// "" when this process can allreduce CUDA tensors (the build has CUDA and a device is
// visible); otherwise why not, for the error a submission gets.
std::string unavailable_reason();

// An event recorded on `stream` (a cudaStream_t; null: the legacy default stream) of `device`
// when a CUDA tensor is submitted: the tensor's data is ready once the event has completed.
// Throws EngineError (THREELC_EINVAL) with CUDA's message.
std::shared_ptr<void> record_ready(int device, void* stream);

// NCCL's version code (ncclGetVersion, e.g. 21803) when uncompressed allreduces of CUDA tensors
// can run over NCCL here: the build has CUDA and nccl.h, and `library` (empty: libnccl.so.2)
// loads. Otherwise 0, and why not in `why_not`.
int nccl_version(const std::string& library, std::string& why_not);

struct DeviceState;
struct DeviceStateDeleter {
  void operator()(DeviceState* state) const;
};
using DeviceStatePtr = std::unique_ptr<DeviceState, DeviceStateDeleter>;

}  // namespace threelc::engine::gpu
