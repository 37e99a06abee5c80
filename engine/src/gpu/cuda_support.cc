#include <cuda_runtime.h>

#include <string>

#include "gpu/cuda_error.h"
#include "gpu/current_device.h"
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
  try {
    const CurrentDevice current(device);
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    std::shared_ptr<void> ready(event,
                                [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
    check_cuda(cudaEventRecord(event, static_cast<cudaStream_t>(stream)),
               "cudaEventRecord on the tensor's stream");
    return ready;
  } catch (const EngineError& e) {
    throw EngineError(THREELC_EINVAL, e.what());
  }
}

int nccl_version(const std::string& library, std::string& why_not) {
  return NcclComm::version(library, why_not);
}

void DeviceStateDeleter::operator()(DeviceState* state) const { delete state; }

}  // namespace threelc::engine::gpu

namespace threelc::engine::gpu {

namespace {

// The background thread's own stream on `device`, which it makes current.
cudaStream_t new_stream(int device) {
  check_cuda(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  return stream;
}

}  // namespace

DeviceState::DeviceState(int device_ordinal, ErrorFeedbackStore& store)
    : device(device_ordinal),
      stream(new_stream(device_ordinal)),
      residuals(device_ordinal, stream),
      feedback(store) {
  store.add_holder(&residuals);
}

DeviceState::~DeviceState() {
  feedback.remove_holder(&residuals);
  nccl.reset();
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
}

}  // namespace threelc::engine::gpu
