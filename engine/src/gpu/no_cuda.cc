// The engine's GPU support in a build without nvcc: CUDA tensors are refused at submission
// with the reason, so the executor's device path is never reached.
#include <string>

#include "engine_error.h"
#include "gpu/gpu.h"
#include "runtime/executor.h"
#include "threelc/compression/cuda_codec.h"
#include "threelc/threelc.h"

namespace threelc::engine {
namespace gpu {

std::string unavailable_reason() {
  std::string why;
  compression::cuda::device_count(&why);
  return why;
}

std::shared_ptr<void> record_ready(int /*device*/, void* /*stream*/) {
  throw EngineError(THREELC_EINVAL, unavailable_reason());
}

int nccl_version(const std::string& /*library*/, std::string& why_not) {
  why_not = "NCCL: this library was built without CUDA";
  return 0;
}

void DeviceStateDeleter::operator()(DeviceState* /*state*/) const {}

}  // namespace gpu

void Executor::device_allreduce(const RunScope& /*scope*/, const Response& /*response*/,
                                std::span<const Operation* const> /*local*/,
                                CollectiveObserver* /*observer*/) {
  throw EngineError(THREELC_EINTERNAL, gpu::unavailable_reason());
}

}  // namespace threelc::engine
