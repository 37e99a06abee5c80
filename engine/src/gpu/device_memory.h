// Internal to gpu/: device memory the background thread keeps across collectives.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "error_feedback.h"

namespace threelc::engine::gpu {

// cudaMalloc'd bytes that grow on demand; contents are unspecified after growing.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  // At least `bytes` (the caller has synchronized any work on the old memory). Throws
  // EngineError when cudaMalloc fails.
  void* reserve(size_t bytes);
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// The error-feedback memory of CUDA tensors: one fp32 buffer per tensor name on the device,
// zeroed on first use and when the name comes back with another element count, as
// ErrorFeedbackStore does on the host, unless the store holds that name's values from a
// checkpoint (a load): those are copied in. The store it is added to (add_holder) saves and
// loads these buffers with its own.
class DeviceResiduals final : public ResidualHolder {
 public:
  // Work on the buffers runs on `stream` of `device`.
  DeviceResiduals(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  // Under an ErrorFeedbackStore::Update of `store`.
  float* get(const std::string& name, size_t count, ErrorFeedbackStore& store);
  size_t size() const { return buffers_.size(); }

  // ResidualHolder, from any thread: copy_out waits for the work queued on the stream.
  void copy_out(std::string_view prefix,
                std::unordered_map<std::string, std::vector<float>>& into) override;
  void forget(std::string_view prefix) override;

 private:
  int device_;
  cudaStream_t stream_;
  struct Entry {
    size_t count = 0;
    DeviceBuffer buffer;
  };
  std::unordered_map<std::string, Entry> buffers_;
};

}  // namespace threelc::engine::gpu
