#include <cuda_runtime.h>

#include <string>

#include "gpu/cuda_error.h"
#include "gpu/device_state.h"
#include "gpu/gpu.h"
#include "gpu/nccl.h"
#include "threelc/compression/cuda_codec.h"

namespace threelc::engine::gpu {

std::string unavailable_reason() {
  std::string why;
  return compression::cuda::device_count(&why) > 0 ? std::string() : why;
}

std::shared_ptr<void> record_ready(int device, void* stream) {
  int previous = 0;
  cudaGetDevice(&previous);
  try {
    check_cuda(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    std::shared_ptr<void> ready(event,
                                [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    check_cuda(cudaEventRecord(event, static_cast<cudaStream_t>(stream)),
               "cudaEventRecord on the tensor's stream");
    cudaSetDevice(previous);
    return ready;
  } catch (const EngineError& e) {
    cudaSetDevice(previous);
    throw EngineError(THREELC_EINVAL, e.what());
  }
}

int nccl_version(const std::string& library, std::string& why_not) {
  return NcclComm::version(library, why_not);
}

void DeviceStateDeleter::operator()(DeviceState* state) const { delete state; }

}  // namespace threelc::engine::gpu

namespace threelc::engine::gpu {

DeviceState::DeviceState(int device_ordinal) : device(device_ordinal) {
  check_cuda(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
}

DeviceState::~DeviceState() {
  nccl.reset();
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
}

}  // namespace threelc::engine::gpu
