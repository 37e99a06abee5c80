#include "gpu/device_memory.h"

#include <utility>

#include "gpu/cuda_error.h"

namespace threelc::engine::gpu {

DeviceBuffer::~DeviceBuffer() { cudaFree(data_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

void* DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_ && data_ != nullptr) return data_;
  cudaFree(data_);
  data_ = nullptr;
  capacity_ = 0;
  check_cuda(cudaMalloc(&data_, bytes > 0 ? bytes : 1),
             ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  capacity_ = bytes;
  return data_;
}

float* DeviceResiduals::get(const std::string& name, size_t count, cudaStream_t stream) {
  auto [it, inserted] = buffers_.try_emplace(name);
  Entry& entry = it->second;
  if (inserted || entry.count != count) {
    void* data = entry.buffer.reserve(count * sizeof(float));
    check_cuda(cudaMemsetAsync(data, 0, count * sizeof(float), stream), "zeroing a residual");
    entry.count = count;
  }
  return static_cast<float*>(entry.buffer.data());
}

}  // namespace threelc::engine::gpu
