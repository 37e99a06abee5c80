// Executor::device_allreduce: allreduce of CUDA tensors, on the background thread's own stream
// of their device, after the framework's stream has reached each tensor's ready event.
// - Compressed: fused_allreduce (runtime/fused_allreduce.cc) on the device's values
//   (device_values.h): widened and fused into an fp32 buffer on the device (or the single fp32
//   tensor reduced in its output), 3LC push_pull or ring with the CUDA codec (only 3LC blocks
//   cross PCIe to the host transport), residuals on the device, average, postscale and
//   narrowing on the device; with THREELC_HIERARCHICAL (and NCCL) NCCL inside the host.
// - Uncompressed: NCCL on the device (THREELC_NCCL=1, no rank joined, no prescale or
//   postscale, an op NCCL computes as we do); otherwise staged through host memory and reduced
//   by host_allreduce, which then does the joined ranks' identities and the scaling.
// Returns once the results are in the outputs (the stream is synchronized), so a framework that
// waits on the handle may use them on any stream.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "gpu/cuda_error.h"
#include "gpu/device_state.h"
#include "gpu/device_values.h"
#include "runtime/executor.h"

namespace threelc::engine {

namespace {

// The device of this rank's tensors in the response (they must share one); -1 when this rank
// has joined and has none.
int device_of(const Response& response, std::span<const Operation* const> local) {
  int device = -1;
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] == nullptr) continue;
    const int d = local[i]->request.device;
    if (device >= 0 && d != device) {
      throw EngineError(THREELC_EINVAL,
                        "allreduce: tensors '" + response.tensors[0].name + "' and '" +
                            response.tensors[i].name + "' were fused but live on cuda:" +
                            std::to_string(device) + " and cuda:" + std::to_string(d) +
                            " (one device per process, or THREELC_FUSION_THRESHOLD=0)");
    }
    device = d;
  }
  return device;
}

void wait_until_ready(cudaStream_t stream, std::span<const Operation* const> local) {
  for (const Operation* op : local) {
    if (op == nullptr || !op->ready) continue;
    gpu::check_cuda(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(op->ready.get()), 0),
                    "waiting for a tensor's stream");
  }
}

}  // namespace

void Executor::device_allreduce(const RunScope& scope, const Response& response,
                                std::span<const Operation* const> local,
                                CollectiveObserver* observer) {
  int device = device_of(response, local);
  if (device < 0) {  // joined: take part on the device used so far, or the current one
    if (!devices_.empty()) {
      device = devices_.begin()->first;
    } else {
      gpu::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    }
  }
  gpu::DeviceStatePtr& slot = devices_[device];
  if (!slot) slot.reset(new gpu::DeviceState(device, residuals_));
  gpu::DeviceState& d = *slot;
  gpu::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  wait_until_ready(d.stream, local);

  const OpRequest& shape = response.tensors[0];
  if (!shape.compress) {
    // The NCCL communicator is the job's: a process set other than 0 stages through the host.
    const bool nccl = options_.nccl && scope.global && scope.ranks.size() > 1 &&
                      response.joined_ranks.empty() && shape.prescale == 1.0 &&
                      shape.postscale == 1.0 && gpu::NcclComm::supports(shape.dtype, shape.op);
    if (nccl) {
      nccl_allreduce(response, local, d);
    } else {
      staged_allreduce(scope, response, local, d, observer);
    }
    return;
  }
  gpu::DeviceValues space(
      d, {.local = local_ranks_.get(),
          .local_index = options_.hierarchical ? options_.hierarchical->local_index : 0,
          .nccl = options_.nccl,
          .library = options_.nccl_library,
          .timeout = options_.timeout,
          .tag = kHierarchicalNcclTag});
  fused_allreduce(scope, space, response, local, observer);
}

void Executor::nccl_allreduce(const Response& response, std::span<const Operation* const> local,
                              gpu::DeviceState& d) {
  if (!d.nccl) {
    d.nccl = gpu::NcclComm::create(context_, d.device, options_.nccl_library, options_.timeout,
                                   kNcclBootstrapTag);
  }
  const OpRequest& shape = response.tensors[0];
  const size_t element_bytes = element_size(shape.dtype);
  if (response.tensors.size() == 1) {
    d.nccl->allreduce(local[0]->input, local[0]->output, shape.element_count(), shape.dtype,
                      shape.op, d.stream);
    return;
  }
  size_t total = 0;
  for (const OpRequest& t : response.tensors) total += t.element_count();
  auto* fused = static_cast<std::byte*>(d.fusion.reserve(total * element_bytes));
  size_t offset = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    const size_t bytes = response.tensors[i].bytes();
    if (bytes > 0) {
      gpu::check_cuda(cudaMemcpyAsync(fused + offset, local[i]->input, bytes,
                                      cudaMemcpyDeviceToDevice, d.stream),
                      "copying into the fusion buffer");
    }
    offset += bytes;
  }
  d.nccl->allreduce(fused, fused, total, shape.dtype, shape.op, d.stream);
  offset = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    const size_t bytes = response.tensors[i].bytes();
    if (bytes > 0) {
      gpu::check_cuda(cudaMemcpyAsync(local[i]->output, fused + offset, bytes,
                                      cudaMemcpyDeviceToDevice, d.stream),
                      "copying out of the fusion buffer");
    }
    offset += bytes;
  }
  gpu::check_cuda(cudaStreamSynchronize(d.stream), "finishing an NCCL allreduce");
}

void Executor::staged_allreduce(const RunScope& scope, const Response& response,
                                std::span<const Operation* const> local, gpu::DeviceState& d,
                                CollectiveObserver* observer) {
  std::vector<std::vector<std::byte>> inputs(local.size());
  std::vector<std::vector<std::byte>> outputs(local.size());
  std::vector<Operation> host(local.size());
  std::vector<const Operation*> host_local(local.size(), nullptr);
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] == nullptr) continue;
    const size_t bytes = response.tensors[i].bytes();
    inputs[i].resize(bytes);
    outputs[i].resize(bytes);
    if (bytes > 0) {
      gpu::check_cuda(cudaMemcpyAsync(inputs[i].data(), local[i]->input, bytes,
                                      cudaMemcpyDeviceToHost, d.stream),
                      "staging a tensor to the host");
    }
    host[i].request = local[i]->request;
    host[i].request.device = -1;
    host[i].input = inputs[i].data();
    host[i].output = outputs[i].data();
    host_local[i] = &host[i];
  }
  gpu::check_cuda(cudaStreamSynchronize(d.stream), "staging tensors to the host");
  host_allreduce(scope, response, host_local, observer);
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] == nullptr || outputs[i].empty()) continue;
    gpu::check_cuda(cudaMemcpyAsync(local[i]->output, outputs[i].data(), outputs[i].size(),
                                    cudaMemcpyHostToDevice, d.stream),
                    "staging a result back to the device");
  }
  gpu::check_cuda(cudaStreamSynchronize(d.stream), "staging results back to the device");
}

}  // namespace threelc::engine
