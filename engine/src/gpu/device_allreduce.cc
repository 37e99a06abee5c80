// Executor::device_allreduce: allreduce of CUDA tensors, on the background thread's own stream
// of their device, after the framework's stream has reached each tensor's ready event.
// - Compressed: the tensors are widened and fused into an fp32 buffer on the device (or the
//   single fp32 tensor is reduced in its output), push_pull runs with the CUDA codec (only 3LC
//   blocks cross PCIe to the host transport; decode-accumulate happens on the device), the
//   residuals stay on the device; average, postscale and narrowing follow on the device. With
//   THREELC_HIERARCHICAL (and NCCL) the host's ranks first reduce-scatter the buffer over NCCL,
//   push_pull runs on each rank's segment with its peers on the other hosts, and an NCCL
//   allgather inside the host follows (collectives/hierarchical.h).
// - Uncompressed: NCCL on the device (THREELC_NCCL=1, no rank joined, no prescale or
//   postscale, an op NCCL computes as we do); otherwise staged through host memory and reduced
//   by host_allreduce, which then does the joined ranks' identities and the scaling.
// Returns once the results are in the outputs (the stream is synchronized), so a framework that
// waits on the handle may use them on any stream.
#include <cuda_runtime.h>

#include <cstring>
#include <optional>
#include <vector>

#include "collectives/hierarchical.h"
#include "collectives/push_pull.h"
#include "gpu/cuda_error.h"
#include "gpu/device_block_codec.h"
#include "gpu/device_state.h"
#include "gpu/elementwise.h"
#include "gpu/nccl_local_exchange.h"
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

void Executor::device_allreduce(const Response& response, std::span<const Operation* const> local,
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
  if (!slot) slot.reset(new gpu::DeviceState(device));
  gpu::DeviceState& d = *slot;
  gpu::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  wait_until_ready(d.stream, local);

  const OpRequest& shape = response.tensors[0];
  if (!shape.compress) {
    // The NCCL communicator is the job's: a process set other than 0 stages through the host.
    const bool nccl = options_.nccl && global() && ranks().size() > 1 &&
                      response.joined_ranks.empty() && shape.prescale == 1.0 &&
                      shape.postscale == 1.0 && gpu::NcclComm::supports(shape.dtype, shape.op);
    if (nccl) {
      nccl_allreduce(response, local, d);
    } else {
      staged_allreduce(response, local, d, observer);
    }
    return;
  }

  const int size = ranks().size();
  const ElementType dtype = shape.dtype;
  std::vector<TensorSlice> slices;
  size_t total = 0;
  for (const OpRequest& t : response.tensors) {
    slices.push_back({feedback_key(t.process_set, t.name), total, t.element_count()});
    total += t.element_count();
  }
  // THREELC_HIERARCHICAL inside the host over NCCL, in a buffer padded to equal segments.
  // Without NCCL (THREELC_NCCL=0, or no nccl.h) every rank runs flat alike.
  std::optional<HierarchicalSegment> segment;
  size_t padded = total;
  if (options_.hierarchical && global() && options_.nccl &&
      gpu::NcclComm::supports(ElementType::kFloat32, ReduceOp::kSum)) {
    const size_t parts = options_.hierarchical->local.size();
    padded = (total + parts - 1) / parts * parts;
    segment = hierarchical_segment(slices, padded, parts,
                                   static_cast<size_t>(options_.hierarchical->local_index));
  }
  const bool in_place = !segment && response.tensors.size() == 1 && local[0] != nullptr &&
                        dtype == ElementType::kFloat32;
  const bool direct = in_place && shape.prescale == 1.0;
  float* buffer = in_place ? static_cast<float*>(local[0]->output)
                           : static_cast<float*>(d.fusion.reserve(padded * sizeof(float)));
  if (padded > total) {
    gpu::check_cuda(cudaMemsetAsync(buffer + total, 0, (padded - total) * sizeof(float), d.stream),
                    "zeroing the padding");
  }
  for (size_t i = 0; i < slices.size() && !direct; ++i) {
    float* dst = buffer + slices[i].offset;
    const size_t count = slices[i].count;
    if (local[i] == nullptr) {
      gpu::check_cuda(cudaMemsetAsync(dst, 0, count * sizeof(float), d.stream),
                      "zeroing a joined rank's part");
      continue;
    }
    gpu::to_float32(dtype, local[i]->input, dst, count, d.stream);
    if (shape.prescale != 1.0) {
      gpu::scale_float32(dst, count, static_cast<float>(shape.prescale), d.stream);
    }
  }

  const std::span<const TensorSlice> compressed =
      segment ? std::span<const TensorSlice>(segment->slices) : slices;
  transport::Context& across = segment ? *cross_ranks_ : ranks();
  std::vector<float*> residuals;
  for (const TensorSlice& t : compressed)
    residuals.push_back(d.residuals.get(t.name, t.count, d.stream));
  // Magnitudes need host memory: the monitor sees raw blocks only.
  std::vector<FeedbackSample> feedback;
  PushPullOptions options =
      compressed_options(shape, compressed, across.size(), false, feedback, observer);
  gpu::DeviceBlockCodec codec(d.workspace, d.stream);
  options.codec = &codec;
  if (segment) {
    if (!d.local_nccl) {
      d.local_nccl = gpu::NcclComm::create(*local_ranks_, d.device, options_.nccl_library,
                                           options_.timeout, kHierarchicalNcclTag);
    }
    gpu::NcclLocalExchange exchange(*d.local_nccl, options_.hierarchical->local_index, d.stream);
    options.tag_base = kHierarchicalTag + 2;
    hierarchical_sum(exchange, std::span<float>(buffer, padded), *segment,
                     [&](std::span<const float> in, std::span<float> out) {
                       push_pull_sum(*cross_ranks_, in, out, segment->slices, residuals, options);
                     });
  } else {
    options.tag_base = kPushPullTag;
    const std::span<const float> input(direct ? static_cast<const float*>(local[0]->input) : buffer,
                                       total);
    push_pull_sum(ranks(), input, std::span<float>(buffer, total), slices, residuals, options);
  }
  feedback_done(shape, compressed, feedback);

  for (size_t i = 0; i < slices.size(); ++i) {
    if (local[i] == nullptr) continue;
    float* src = buffer + slices[i].offset;
    const size_t count = slices[i].count;
    if (shape.op == ReduceOp::kAverage) {
      gpu::divide_float32(src, count, static_cast<float>(size), d.stream);
    }
    if (shape.postscale != 1.0) {
      gpu::scale_float32(src, count, static_cast<float>(shape.postscale), d.stream);
    }
    if (!in_place) gpu::from_float32(dtype, src, local[i]->output, count, d.stream);
  }
  gpu::check_cuda(cudaStreamSynchronize(d.stream), "finishing a compressed allreduce");
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

void Executor::staged_allreduce(const Response& response, std::span<const Operation* const> local,
                                gpu::DeviceState& d, CollectiveObserver* observer) {
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
  host_allreduce(response, host_local, observer);
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] == nullptr || outputs[i].empty()) continue;
    gpu::check_cuda(cudaMemcpyAsync(local[i]->output, outputs[i].data(), outputs[i].size(),
                                    cudaMemcpyHostToDevice, d.stream),
                    "staging a result back to the device");
  }
  gpu::check_cuda(cudaStreamSynchronize(d.stream), "staging results back to the device");
}

}  // namespace threelc::engine
