// Executor::fused_allreduce: the allreduce of a response's tensors, host or CUDA, in one
// sequence of steps over a ValueSpace (value_space.h):
//   1. vocabulary: the tensors' slices of the fused buffer, the type the sum works in (fp32
//      for 3LC, the tensors' own otherwise), the hierarchical segment, whether the single
//      tensor is reduced in its output (in place) and whether push_pull reads its input
//      itself (direct);
//   2. copy in: widen each tensor into the fusion buffer, or the op's identity where this
//      rank has joined, and prescale;
//   3. sum: 3LC push_pull or ring, flat or hierarchical (compressed_sum), or the raw
//      scatter/reduce/gather (host memory only);
//   4. copy out: divide for an average, postscale and narrow into each output.
#include <cstring>
#include <optional>
#include <stdexcept>

#include "collectives/hierarchical.h"
#include "collectives/push_pull.h"
#include "collectives/raw_allreduce.h"
#include "collectives/reduce_ops.h"
#include "collectives/ring_allreduce.h"
#include "runtime/executor.h"
#include "runtime/host_values.h"

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

void Executor::allreduce(const RunScope& scope, const Response& response,
                         std::span<const Operation* const> local, CollectiveObserver* observer) {
  // Every rank agrees on host or device (negotiation checks it), whatever its device ordinal.
  if (response.tensors[0].device >= 0) {
    device_allreduce(scope, response, local, observer);
  } else {
    host_allreduce(scope, response, local, observer);
  }
}

void Executor::host_allreduce(const RunScope& scope, const Response& response,
                              std::span<const Operation* const> local,
                              CollectiveObserver* observer) {
  HostValues space(
      {.fusion = fusion_buffer_, .residuals = residuals_, .local = host_exchange_.get()});
  fused_allreduce(scope, space, response, local, observer);
}

void Executor::fused_allreduce(const RunScope& scope, ValueSpace& space, const Response& response,
                               std::span<const Operation* const> local,
                               CollectiveObserver* observer) {
  const OpRequest& shape = response.tensors[0];
  const ElementType dtype = shape.dtype;
  std::vector<TensorSlice> slices;
  size_t total = 0;
  for (const OpRequest& t : response.tensors) {
    slices.push_back({feedback_key(t.process_set, t.name), total, t.element_count()});
    total += t.element_count();
  }
  if (!shape.compress && !space.codec().host_values()) {
    throw std::logic_error("allreduce: uncompressed sums of device memory go through the host");
  }
  // The type the reduction works in: fp32 for 3LC, the tensors' own otherwise.
  const ElementType computed = shape.compress ? ElementType::kFloat32 : dtype;
  const size_t element_bytes = element_size(computed);
  // THREELC_HIERARCHICAL: the job's compressed sums, where the values can be exchanged inside
  // the host (a process set other than 0 runs flat: the host groups are the job's).
  LocalExchange* exchange = shape.compress && options_.hierarchical && scope.global
                                ? space.local_exchange(observer)
                                : nullptr;
  std::optional<HierarchicalSegment> segment;
  size_t padded = total;
  if (exchange != nullptr) {
    const size_t parts = options_.hierarchical->local.size();
    padded = space.padded(total, parts);
    segment = hierarchical_segment(slices, padded, parts,
                                   static_cast<size_t>(options_.hierarchical->local_index));
  }
  // One local fp32/raw tensor computed in place in its output: no fusion buffer needed.
  const bool in_place = response.tensors.size() == 1 && local[0] != nullptr &&
                        (!shape.compress || dtype == ElementType::kFloat32) && padded == total;
  // push_pull and the raw allreduce can read the input and write the output themselves,
  // saving a copy of the input.
  const bool direct =
      in_place && shape.prescale == 1.0 && (!shape.compress || (!options_.ring && !segment));
  std::byte* buffer = in_place ? static_cast<std::byte*>(local[0]->output)
                               : space.fusion_buffer(padded * element_bytes);
  if (padded > total) space.zero(reinterpret_cast<float*>(buffer) + total, padded - total);

  for (size_t i = 0; i < slices.size() && !direct; ++i) {
    std::byte* dst = buffer + slices[i].offset * element_bytes;
    const size_t count = slices[i].count;
    CopyTimer timer(observer, i, count * element_bytes);
    const Operation* op = local[i];
    if (op == nullptr) {
      if (shape.compress) {
        space.zero(reinterpret_cast<float*>(dst), count);
      } else {
        fill_identity(dtype, shape.op, dst, count);  // host memory (checked above)
      }
      continue;
    }
    space.convert(dtype, op->input, computed, dst, count);
    if (shape.prescale != 1.0) space.scale(computed, dst, count, shape.prescale);
  }

  if (shape.compress) {
    const std::span<float> values(reinterpret_cast<float*>(buffer), padded);
    const std::span<const float> input =
        direct ? std::span<const float>(static_cast<const float*>(local[0]->input), total) : values;
    compressed_sum(scope, space,
                   {.shape = shape,
                    .input = input,
                    .values = values,
                    .slices = slices,
                    .segment = segment ? &*segment : nullptr,
                    .exchange = exchange,
                    .observer = observer});
  } else {
    CollectiveOptions options;
    options.chunk_bytes = options_.chunk_bytes;
    options.tag_base = kRawAllreduceTag;
    options.observer = observer;
    options.workspace = &workspace_;
    const std::span<std::byte> values(buffer, total * element_bytes);
    const std::span<const std::byte> input =
        direct ? std::span<const std::byte>(static_cast<const std::byte*>(local[0]->input),
                                            values.size())
               : values;
    allreduce_raw(scope.ranks, input, values, dtype, shape.op, slices, options);
  }

  const int size = scope.ranks.size();
  for (size_t i = 0; i < slices.size(); ++i) {
    const Operation* op = local[i];
    if (op == nullptr) continue;
    std::byte* src = buffer + slices[i].offset * element_bytes;
    const size_t count = slices[i].count;
    CopyTimer timer(observer, i, count * element_bytes);
    if (shape.op == ReduceOp::kAverage) space.divide(computed, src, count, size);
    if (shape.postscale != 1.0) space.scale(computed, src, count, shape.postscale);
    if (!in_place) space.convert(computed, src, dtype, op->output, count);
  }
  space.finish();
}

void Executor::compressed_sum(const RunScope& scope, ValueSpace& space, const CompressedSum& sum) {
  // Hierarchically, this rank compresses only the pieces of tensors in its segment, each with
  // its own residual, among its peers on the other hosts.
  const std::span<const TensorSlice> compressed =
      sum.segment ? std::span<const TensorSlice>(sum.segment->slices) : sum.slices;
  transport::Context& across = sum.segment ? *cross_ranks_ : scope.ranks;

  std::vector<FeedbackSample> feedback;
  CompressedAllreduceOptions options = compressed_options(
      sum.shape, compressed, across.size(), space.codec().host_values(), feedback, sum.observer);
  options.codec = &space.codec();
  options.tag_base = sum.segment     ? kHierarchicalTag + 2
                     : options_.ring ? kRingAllreduceTag
                                     : kPushPullTag;
  // Checkpoints read and replace the residuals from other threads: they wait until the
  // collective is over (error_feedback.h says why a mutex).
  ErrorFeedbackStore::Update update(residuals_);
  std::vector<float*> residuals;
  for (const TensorSlice& t : compressed) residuals.push_back(space.residual(t.name, t.count));
  auto run = [&](transport::Context& ranks, std::span<const float> in, std::span<float> out) {
    if (options_.ring) {
      if (in.data() != out.data()) space.codec().copy(out.data(), in.data(), in.size());
      ring_allreduce_sum(ranks, out, compressed, residuals, options);
    } else {
      push_pull_sum(ranks, in, out, compressed, residuals, options);
    }
  };
  if (sum.segment) {
    hierarchical_sum(
        *sum.exchange, sum.values, *sum.segment,
        [&](std::span<const float> in, std::span<float> out) { run(*cross_ranks_, in, out); });
  } else {
    run(across, sum.input, sum.values);
  }
  update.done();
  feedback_done(sum.shape, compressed, feedback);
}

CompressedAllreduceOptions Executor::compressed_options(const OpRequest& shape,
                                                        std::span<const TensorSlice> compressed,
                                                        int ranks, bool measure,
                                                        std::vector<FeedbackSample>& feedback,
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
  CompressedAllreduceOptions options;
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
