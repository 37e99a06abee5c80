#include "gpu/device_memory.h"

#include <utility>
#include <vector>

#include "gpu/cuda_error.h"
#include "gpu/current_device.h"

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

float* DeviceResiduals::get(const std::string& name, size_t count, ErrorFeedbackStore& store) {
  auto [it, inserted] = buffers_.try_emplace(name);
  Entry& entry = it->second;
  if (inserted || entry.count != count) {
    const size_t bytes = count * sizeof(float);
    void* data = entry.buffer.reserve(bytes);
    if (const auto loaded = store.take(name, count)) {
      check_cuda(cudaMemcpyAsync(data, loaded->data(), bytes, cudaMemcpyHostToDevice, stream_),
                 "copying a loaded residual to the device");
      // The host copy goes with this scope: the copy must be done by then.
      check_cuda(cudaStreamSynchronize(stream_), "copying a loaded residual to the device");
    } else {
      check_cuda(cudaMemsetAsync(data, 0, bytes, stream_), "zeroing a residual");
    }
    entry.count = count;
  }
  return static_cast<float*>(entry.buffer.data());
}

void DeviceResiduals::copy_out(std::string_view prefix,
                               std::unordered_map<std::string, std::vector<float>>& into) {
  const CurrentDevice current(device_);
  check_cuda(cudaStreamSynchronize(stream_), "waiting for the residuals' stream");
  for (const auto& [name, entry] : buffers_) {
    if (!name.starts_with(prefix)) continue;
    std::vector<float>& values = into[name];
    values.resize(entry.count);
    check_cuda(cudaMemcpy(values.data(), entry.buffer.data(), entry.count * sizeof(float),
                          cudaMemcpyDeviceToHost),
               "copying a residual to the host");
  }
}

void DeviceResiduals::forget(std::string_view prefix) {
  std::erase_if(buffers_, [&](const auto& entry) { return entry.first.starts_with(prefix); });
}

}  // namespace threelc::engine::gpu
