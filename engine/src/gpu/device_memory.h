// Internal to gpu/: device memory the background thread keeps across collectives.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <unordered_map>

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
// zeroed (on `stream`) on first use and when the name comes back with another element count,
// as ErrorFeedbackStore does on the host.
class DeviceResiduals {
 public:
  float* get(const std::string& name, size_t count, cudaStream_t stream);
  size_t size() const { return buffers_.size(); }

 private:
  struct Entry {
    size_t count = 0;
    DeviceBuffer buffer;
  };
  std::unordered_map<std::string, Entry> buffers_;
};

}  // namespace threelc::engine::gpu
