#include "collectives/raw_allreduce.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "collectives/reduce_ops.h"
#include "collectives/scratch_buffer.h"
#include "collectives/segment_ring.h"

namespace threelc::engine {

namespace {

// What a call reduces: `input` (this rank's values, or `fused` itself), elements of `type`,
// combined with `op`, into `fused`.
struct RawReduction {
  std::span<const std::byte> input;
  std::span<std::byte> fused;
  ElementType type = ElementType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// One call's state: the ring skeleton (segment_ring.h) over the chunk plan (the plan sees the
// whole buffer as one tensor, so each of its blocks is one chunk) and the staging of pushed
// chunks. Its steps: post_receives(), push(), reduce_and_send(), receive_and_forward().
class RawAllreduce {
 public:
  RawAllreduce(transport::Context& context, BlockPlan plan, const RawReduction& reduction,
               const CollectiveOptions& options)
      : ring_(context, std::move(plan),
              {.collective = "allreduce_raw",
               .tag_base = options.tag_base,
               .observer = options.observer}),
        input_(reduction.input),
        fused_(reduction.fused),
        type_(reduction.type),
        op_(reduction.op),
        element_bytes_(element_size(reduction.type)),
        options_(options),
        own_staging_(static_cast<size_t>(ring_.size())),
        staging_(static_cast<size_t>(ring_.size())),
        push_ids_(static_cast<size_t>(ring_.size())) {}

  void run() {
    ring_.run([this] {
      post_receives();
      push();
      reduce_and_send();
      receive_and_forward();
    });
  }

 private:
  std::span<std::byte> bytes_of(const Block& b) const {
    return fused_.subspan(b.offset * element_bytes_, b.count * element_bytes_);
  }
  std::span<const std::byte> input_of(const Block& b) const {
    return input_.subspan(b.offset * element_bytes_, b.count * element_bytes_);
  }

  // Where chunk b of this rank's segment lies in a peer's staging buffer.
  std::span<std::byte> staged(int peer, const Block& b) {
    const size_t first = ring_.own_segment().front().offset;
    return std::span<std::byte>(*staging_[static_cast<size_t>(peer)])
        .subspan((b.offset - first) * element_bytes_, b.count * element_bytes_);
  }

  // Pushed chunks of this rank's segment from every peer (staged), pulled chunks of every other
  // segment from the previous rank (straight into place). All before the first send.
  //
  // In place (input and output one buffer), a pulled chunk overwrites bytes this rank pushed
  // from; that is safe because the owner sends it only after it has received this rank's push
  // of the same chunk in full.
  void post_receives() {
    const auto own = ring_.own_segment();
    if (!own.empty()) {
      const size_t bytes =
          (own.back().offset + own.back().count - own.front().offset) * element_bytes_;
      for (int p = 0; p < ring_.size(); ++p) {
        if (p == ring_.rank()) continue;
        const auto pi = static_cast<size_t>(p);
        staging_[pi] =
            options_.workspace ? &options_.workspace->staging(pi, bytes) : &own_staging_[pi];
        staging_[pi]->resize(bytes);
        for (const Block& b : own) {
          push_ids_[pi].push_back(
              ring_.transfers().receive(p, ring_.owner_tag(), staged(p, b), b.tensor));
        }
      }
    }
    ring_.post_pull_receives([this](const Block& b) { return bytes_of(b); }, /*exact=*/true);
  }

  // Every other segment's chunks go to their owner, nearest successor first.
  void push() {
    for (int d = 1; d < ring_.size(); ++d) {
      const int j = ring_.rank_after(d);
      for (const Block& b : ring_.segment(j)) {
        ring_.transfers().send(j, ring_.owner_tag(), input_of(b), b.tensor);
      }
    }
  }

  // The owner folds x0 op x1 op ... in rank order (its own values at its rank's place), keeps
  // the result and starts it round the ring.
  void reduce_and_send() {
    const int rank = ring_.rank();
    const int size = ring_.size();
    const auto own = ring_.own_segment();
    for (size_t k = 0; k < own.size(); ++k) {
      const Block& b = own[k];
      for (int p = 0; p < size; ++p) {
        if (p != rank) ring_.transfers().wait(push_ids_[static_cast<size_t>(p)][k]);
      }
      const int64_t begin = detail::event_start(options_.observer);
      const std::span<std::byte> mine = bytes_of(b);
      const std::span<const std::byte> my_input = input_of(b);
      if (rank == 0 && my_input.data() != mine.data()) {
        std::memcpy(mine.data(), my_input.data(), mine.size());
      }
      std::span<std::byte> acc = rank == 0 ? mine : staged(0, b);
      for (int p = 1; p < size; ++p) {
        const std::span<const std::byte> in = p == rank ? my_input : staged(p, b);
        reduce_into(type_, op_, acc.data(), in.data(), b.count);
      }
      if (acc.data() != mine.data()) std::memcpy(mine.data(), acc.data(), mine.size());
      detail::record_event(options_.observer, Phase::kReduce, b.tensor, begin,
                           mine.size() * static_cast<size_t>(size - 1));
      ring_.send_pull(b, mine);
    }
  }

  // Every other segment in ring order: each chunk lands in place and goes on unchanged.
  void receive_and_forward() {
    ring_.receive_and_forward([](const Block&, std::span<const std::byte>) {});
  }

  SegmentRing ring_;
  std::span<const std::byte> input_;
  std::span<std::byte> fused_;
  ElementType type_;
  ReduceOp op_;
  size_t element_bytes_;
  const CollectiveOptions& options_;
  std::vector<ScratchBuffer<std::byte>> own_staging_;  // used without a workspace
  std::vector<ScratchBuffer<std::byte>*> staging_;     // [peer]: its pushes of this segment
  std::vector<std::vector<size_t>> push_ids_;          // [peer][chunk of own segment]
};

}  // namespace

void allreduce_raw(transport::Context& context, std::span<std::byte> fused, ElementType type,
                   ReduceOp op, std::span<const TensorSlice> tensors,
                   const CollectiveOptions& options) {
  allreduce_raw(context, fused, fused, type, op, tensors, options);
}

void allreduce_raw(transport::Context& context, std::span<const std::byte> input,
                   std::span<std::byte> fused, ElementType type, ReduceOp op,
                   std::span<const TensorSlice> tensors, const CollectiveOptions& options) {
  if (input.size() != fused.size()) {
    throw std::invalid_argument("allreduce_raw: input of " + std::to_string(input.size()) +
                                " bytes for an output of " + std::to_string(fused.size()));
  }
  const size_t element_bytes = element_size(type);
  if (element_bytes == 0) {
    throw std::invalid_argument("allreduce_raw: unknown element type " +
                                std::to_string(static_cast<int>(type)));
  }
  if (static_cast<int>(op) >= kReduceOpCount) {
    throw std::invalid_argument("allreduce_raw: unknown reduce op " +
                                std::to_string(static_cast<int>(op)));
  }
  if (fused.size() % element_bytes != 0) {
    throw std::invalid_argument("allreduce_raw: buffer of " + std::to_string(fused.size()) +
                                " bytes is not a whole number of " + element_type_name(type) +
                                " values");
  }
  const size_t total = fused.size() / element_bytes;
  if (!tensors.empty()) check_layout(total, tensors);
  // Chunks of the whole buffer, whatever the tensors; each names the tensor it starts in.
  const TensorSlice whole{"", 0, total};
  BlockPlan plan = plan_blocks(total, std::span<const TensorSlice>(&whole, 1), context.size(),
                               options.chunk_bytes, element_bytes);
  size_t t = 0;
  for (Block& b : plan.blocks) {
    while (t + 1 < tensors.size() && tensors[t].offset + tensors[t].count <= b.offset) ++t;
    b.tensor = t;
  }
  if (context.size() == 1) {
    if (input.data() != fused.data() && !fused.empty()) {
      std::memcpy(fused.data(), input.data(), fused.size());
    }
    return;
  }
  RawAllreduce(context, std::move(plan), {.input = input, .fused = fused, .type = type, .op = op},
               options)
      .run();
}

}  // namespace threelc::engine
