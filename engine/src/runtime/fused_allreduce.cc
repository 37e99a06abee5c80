// Executor::host_allreduce: copies a response's tensors into the fusion buffer (fp32 when
// compressed, their own dtype otherwise), applies prescale, runs push_pull (or the ring, or the
// raw scatter/reduce/gather), divides for an average, applies postscale and copies out.
// Executor::allreduce sends CUDA tensors to device_allreduce (gpu/device_allreduce.cc).
#include <algorithm>
#include <cstring>
#include <optional>

#include "collectives/hierarchical.h"
#include "collectives/push_pull.h"
#include "collectives/raw_allreduce.h"
#include "collectives/reduce_ops.h"
#include "collectives/ring_allreduce.h"
#include "runtime/executor.h"

namespace threelc::engine {

namespace {

// Times a copy into or out of the fusion buffer as a kCopy event of tensor `index`.
class CopyTimer {
 public:
  CopyTimer(CollectiveObserver* observer, size_t index, size_t bytes)
      : observer_(observer), index_(index), bytes_(bytes), begin_(steady_now_ns()) {}
  ~CopyTimer() {
    if (observer_) observer_->record({index_, Phase::kCopy, begin_, steady_now_ns(), bytes_, -1});
  }
  CopyTimer(const CopyTimer&) = delete;
  CopyTimer& operator=(const CopyTimer&) = delete;

 private:
  CollectiveObserver* observer_;
  size_t index_;
  size_t bytes_;
  int64_t begin_;
};

}  // namespace

void Executor::allreduce(const Response& response, std::span<const Operation* const> local,
                         CollectiveObserver* observer) {
  // Every rank agrees on host or device (negotiation checks it), whatever its device ordinal.
  if (response.tensors[0].device >= 0) {
    device_allreduce(response, local, observer);
  } else {
    host_allreduce(response, local, observer);
  }
}

void Executor::host_allreduce(const Response& response, std::span<const Operation* const> local,
                              CollectiveObserver* observer) {
  const OpRequest& shape = response.tensors[0];
  const ElementType dtype = shape.dtype;
  const int size = ranks().size();
  std::vector<TensorSlice> slices;
  size_t total = 0;
  for (const OpRequest& t : response.tensors) {
    slices.push_back({feedback_key(t.process_set, t.name), total, t.element_count()});
    total += t.element_count();
  }
  // The type the reduction works in: fp32 for 3LC, the tensors' own otherwise.
  const ElementType computed = shape.compress ? ElementType::kFloat32 : dtype;
  const size_t element_bytes = element_size(computed);
  // One local fp32/raw tensor computed in place in its output: no fusion buffer needed.
  const bool in_place = response.tensors.size() == 1 && local[0] != nullptr &&
                        (!shape.compress || dtype == ElementType::kFloat32);
  // push_pull can read the input and write the output itself, saving a copy of the input.
  const bool direct = in_place && shape.compress && !options_.ring &&
                      !(options_.hierarchical && global()) && shape.prescale == 1.0;
  std::byte* buffer = nullptr;
  if (in_place) {
    buffer = static_cast<std::byte*>(local[0]->output);
  } else {
    if (fusion_buffer_.size() < total * element_bytes) fusion_buffer_.resize(total * element_bytes);
    buffer = fusion_buffer_.data();
  }

  for (size_t i = 0; i < slices.size() && !direct; ++i) {
    std::byte* dst = buffer + slices[i].offset * element_bytes;
    const size_t count = slices[i].count;
    CopyTimer timer(observer, i, count * element_bytes);
    const Operation* op = local[i];
    if (op == nullptr) {
      if (shape.compress) {
        std::memset(dst, 0, count * sizeof(float));
      } else {
        fill_identity(dtype, shape.op, dst, count);
      }
      continue;
    }
    if (computed != dtype) {
      to_float32(dtype, op->input, reinterpret_cast<float*>(dst), count);
    } else if (dst != op->input && count > 0) {
      std::memcpy(dst, op->input, count * element_bytes);
    }
    if (shape.prescale != 1.0) scale_values(computed, dst, count, shape.prescale);
  }

  if (shape.compress) {
    const std::span<float> values(reinterpret_cast<float*>(buffer), total);
    const std::span<const float> input =
        direct ? std::span<const float>(static_cast<const float*>(local[0]->input), total) : values;
    host_compressed_sum(shape, input, values, slices, observer);
  } else {
    CollectiveOptions options;
    options.chunk_bytes = options_.chunk_bytes;
    options.tag_base = kRawAllreduceTag;
    options.observer = observer;
    options.workspace = &workspace_;
    allreduce_raw(ranks(), std::span<std::byte>(buffer, total * element_bytes), dtype, shape.op,
                  slices, options);
  }

  for (size_t i = 0; i < slices.size(); ++i) {
    const Operation* op = local[i];
    if (op == nullptr) continue;
    std::byte* src = buffer + slices[i].offset * element_bytes;
    const size_t count = slices[i].count;
    CopyTimer timer(observer, i, count * element_bytes);
    if (shape.op == ReduceOp::kAverage) divide_values(computed, src, count, size);
    if (shape.postscale != 1.0) scale_values(computed, src, count, shape.postscale);
    if (in_place) break;
    if (shape.compress) {
      from_float32(dtype, reinterpret_cast<const float*>(src), op->output, count);
    } else if (count > 0) {
      std::memcpy(op->output, src, count * element_bytes);
    }
  }
}

}  // namespace threelc::engine

namespace threelc::engine {

void Executor::host_compressed_sum(const OpRequest& shape, std::span<const float> input,
                                   std::span<float> values, std::span<const TensorSlice> slices,
                                   CollectiveObserver* observer) {
  // Hierarchically, this rank compresses only the pieces of tensors in its segment, each
  // with its own residual; the cross group decides whether anything is compressed at all.
  // The host groups are the job's: a process set other than 0 runs flat.
  std::optional<HierarchicalSegment> segment;
  if (options_.hierarchical && global()) {
    segment = hierarchical_segment(slices, values.size(), options_.hierarchical->local.size(),
                                   static_cast<size_t>(options_.hierarchical->local_index));
  }
  const std::span<const TensorSlice> compressed =
      segment ? std::span<const TensorSlice>(segment->slices) : slices;
  transport::Context& across = segment ? *cross_ranks_ : ranks();

  std::vector<FeedbackSample> feedback;
  PushPullOptions options =
      compressed_options(shape, compressed, across.size(), true, feedback, observer);
  options.tag_base = segment         ? kHierarchicalTag + 2
                     : options_.ring ? kRingAllreduceTag
                                     : kPushPullTag;
  // Checkpoints read and replace the residuals from other threads: they wait until the
  // collective is over (error_feedback.h says why a mutex).
  ErrorFeedbackStore::Update update(errors_);
  auto sum = [&](transport::Context& ranks, std::span<const float> in, std::span<float> out,
                 std::span<const TensorSlice> tensors) {
    if (options_.ring) {
      if (in.data() != out.data()) std::copy(in.begin(), in.end(), out.begin());
      ring_allreduce_sum(ranks, out, tensors, errors_, options);
    } else {
      push_pull_sum(ranks, in, out, tensors, errors_, options);
    }
  };
  if (segment) {
    host_exchange_->observe(observer);
    hierarchical_sum(*host_exchange_, values, *segment,
                     [&](std::span<const float> in, std::span<float> out) {
                       sum(*cross_ranks_, in, out, segment->slices);
                     });
  } else {
    sum(ranks(), input, values, slices);
  }
  update.done();
  feedback_done(shape, compressed, feedback);
}

PushPullOptions Executor::compressed_options(const OpRequest& shape,
                                             std::span<const TensorSlice> compressed, int ranks,
                                             bool measure, std::vector<FeedbackSample>& feedback,
                                             CollectiveObserver* observer) {
  // The error-feedback monitor: every compressed call reports raw (non-finite) blocks; a
  // tensor's sampled steps also measure its magnitudes. With one rank nothing is compressed.
  feedback.clear();
  if (ranks > 1) {
    feedback.resize(compressed.size());
    for (size_t i = 0; i < compressed.size(); ++i) {
      feedback[i] = feedback_.next_sample(compressed[i].name);
      feedback[i].measure = feedback[i].measure && measure;
    }
  }
  PushPullOptions options;
  options.compress = true;
  options.sparsity = shape.sparsity;
  options.scale_tile = options_.scale_tile;
  options.chunk_bytes = options_.chunk_bytes;
  options.observer = observer;
  options.workspace = &workspace_;
  options.feedback = feedback;
  return options;
}

void Executor::feedback_done(const OpRequest& shape, std::span<const TensorSlice> compressed,
                             std::span<const FeedbackSample> feedback) {
  for (size_t i = 0; i < feedback.size(); ++i) {
    feedback_.step_done(compressed[i].name, shape.sparsity, feedback[i], alerts_);
  }
}

}  // namespace threelc::engine
