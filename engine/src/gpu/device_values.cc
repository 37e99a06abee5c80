#include "gpu/device_values.h"

#include <stdexcept>

#include "gpu/cuda_error.h"
#include "gpu/elementwise.h"

namespace threelc::engine::gpu {

namespace {

// Compressed sums work in fp32: the only type scaled or averaged on the device.
void check_float32(ElementType type, const char* step) {
  if (type != ElementType::kFloat32) {
    throw std::logic_error(std::string("device values: ") + step + " of a type other than fp32");
  }
}

}  // namespace

DeviceValues::DeviceValues(DeviceState& device, const LocalNccl& local_nccl)
    : device_(device), local_nccl_(local_nccl), codec_(device.workspace, device.stream) {}

std::byte* DeviceValues::fusion_buffer(size_t bytes) {
  return static_cast<std::byte*>(device_.fusion.reserve(bytes));
}

void DeviceValues::convert(ElementType from, const void* src, ElementType to, void* dst,
                           size_t count) {
  if (to == ElementType::kFloat32) {
    if (from != to || dst != src) {
      to_float32(from, src, static_cast<float*>(dst), count, device_.stream);
    }
  } else {
    check_float32(from, "narrowing");
    from_float32(to, static_cast<const float*>(src), dst, count, device_.stream);
  }
}

void DeviceValues::zero(float* dst, size_t count) {
  check_cuda(cudaMemsetAsync(dst, 0, count * sizeof(float), device_.stream),
             "zeroing values on the device");
}

void DeviceValues::scale(ElementType type, void* values, size_t count, double factor) {
  check_float32(type, "scaling");
  scale_float32(static_cast<float*>(values), count, static_cast<float>(factor), device_.stream);
}

void DeviceValues::divide(ElementType type, void* values, size_t count, int divisor) {
  check_float32(type, "averaging");
  divide_float32(static_cast<float*>(values), count, static_cast<float>(divisor), device_.stream);
}

float* DeviceValues::residual(const std::string& name, size_t count) {
  return device_.residuals.get(name, count, device_.feedback);
}

LocalExchange* DeviceValues::local_exchange(CollectiveObserver* /*observer*/) {
  if (local_nccl_.local == nullptr || !local_nccl_.nccl ||
      !NcclComm::supports(ElementType::kFloat32, ReduceOp::kSum)) {
    return nullptr;
  }
  if (!device_.local_nccl) {
    device_.local_nccl = NcclComm::create(*local_nccl_.local, device_.device, local_nccl_.library,
                                          local_nccl_.timeout, local_nccl_.tag);
  }
  if (!exchange_) exchange_.emplace(*device_.local_nccl, local_nccl_.local_index, device_.stream);
  return &*exchange_;
}

void DeviceValues::finish() {
  check_cuda(cudaStreamSynchronize(device_.stream), "finishing a compressed allreduce");
}

}  // namespace threelc::engine::gpu
