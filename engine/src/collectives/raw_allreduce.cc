#include "collectives/raw_allreduce.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "collectives/reduce_ops.h"
#include "collectives/scratch_buffer.h"

namespace threelc::engine {

namespace {

// One call's state: the chunk plan, the staging of pushed chunks and every posted transfer.
class RawAllreduce {
 public:
  RawAllreduce(transport::Context& context, std::span<std::byte> fused, ElementType type,
               ReduceOp op, BlockPlan plan, const CollectiveOptions& options)
      : fused_(fused),
        type_(type),
        op_(op),
        element_bytes_(element_size(type)),
        options_(options),
        rank_(context.rank()),
        size_(context.size()),
        next_((rank_ + 1) % size_),
        prev_((rank_ + size_ - 1) % size_),
        plan_(std::move(plan)),
        transfers_(context, options.observer, "allreduce_raw rank " + std::to_string(rank_)),
        own_staging_(static_cast<size_t>(size_)),
        staging_(static_cast<size_t>(size_)),
        push_ids_(static_cast<size_t>(size_)),
        pull_ids_(static_cast<size_t>(size_)) {}

  void run() {
    transfers_.run([this] {
      post_receives();
      push();
      reduce_and_send();
      receive_and_forward();
    });
  }

 private:
  uint32_t push_tag() const { return options_.tag_base; }
  uint32_t pull_tag(int segment) const {
    return options_.tag_base + 1 + static_cast<uint32_t>(segment);
  }
  int ring_segment(int distance) const { return (rank_ + size_ - distance) % size_; }

  std::span<std::byte> bytes_of(const Block& b) const {
    return fused_.subspan(b.offset * element_bytes_, b.count * element_bytes_);
  }

  // Where block b of this rank's segment lies in a peer's staging buffer.
  std::span<std::byte> staged(int peer, const Block& b) {
    const size_t first = plan_.segment(rank_).front().offset;
    return std::span<std::byte>(*staging_[static_cast<size_t>(peer)])
        .subspan((b.offset - first) * element_bytes_, b.count * element_bytes_);
  }

  // Pushed chunks of this rank's segment from every peer (staged), pulled chunks of every other
  // segment from the previous rank (straight into place). All before the first send.
  //
  // A pulled chunk overwrites bytes this rank pushed from; that is safe because the owner sends
  // it only after it has received this rank's push of the same chunk in full.
  void post_receives() {
    const auto own = plan_.segment(rank_);
    if (!own.empty()) {
      const size_t bytes =
          (own.back().offset + own.back().count - own.front().offset) * element_bytes_;
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        const auto pi = static_cast<size_t>(p);
        staging_[pi] =
            options_.workspace ? &options_.workspace->staging(pi, bytes) : &own_staging_[pi];
        staging_[pi]->resize(bytes);
        for (const Block& b : own) {
          push_ids_[pi].push_back(transfers_.receive(p, push_tag(), staged(p, b), b.tensor));
        }
      }
    }
    for (int d = 1; d < size_; ++d) {
      const int j = ring_segment(d);
      for (const Block& b : plan_.segment(j)) {
        pull_ids_[static_cast<size_t>(j)].push_back(
            transfers_.receive(prev_, pull_tag(j), bytes_of(b), b.tensor));
      }
    }
  }

  // Every other segment's chunks go to their owner, nearest successor first.
  void push() {
    for (int d = 1; d < size_; ++d) {
      const int j = (rank_ + d) % size_;
      for (const Block& b : plan_.segment(j)) transfers_.send(j, push_tag(), bytes_of(b), b.tensor);
    }
  }

  // The owner folds x0 op x1 op ... in rank order (its own values at its rank's place), keeps
  // the result and starts it round the ring.
  void reduce_and_send() {
    const auto own = plan_.segment(rank_);
    for (size_t k = 0; k < own.size(); ++k) {
      const Block& b = own[k];
      for (int p = 0; p < size_; ++p) {
        if (p != rank_) transfers_.wait(push_ids_[static_cast<size_t>(p)][k]);
      }
      const int64_t begin = detail::event_start(options_.observer);
      const std::span<std::byte> mine = bytes_of(b);
      std::span<std::byte> acc = rank_ == 0 ? mine : staged(0, b);
      for (int p = 1; p < size_; ++p) {
        const std::span<const std::byte> in = p == rank_ ? mine : staged(p, b);
        reduce_into(type_, op_, acc.data(), in.data(), b.count);
      }
      if (acc.data() != mine.data()) std::memcpy(mine.data(), acc.data(), mine.size());
      detail::record_event(options_.observer, Phase::kReduce, b.tensor, begin,
                           mine.size() * static_cast<size_t>(size_ - 1));
      transfers_.send(next_, pull_tag(rank_), mine, b.tensor);
    }
  }

  // Every other segment in ring order: wait for each chunk and forward the same bytes.
  void receive_and_forward() {
    for (int d = 1; d < size_; ++d) {
      const int j = ring_segment(d);
      const auto blocks = plan_.segment(j);
      const auto& ids = pull_ids_[static_cast<size_t>(j)];
      for (size_t k = 0; k < blocks.size(); ++k) {
        transfers_.wait(ids[k]);
        if (next_ != j) transfers_.send(next_, pull_tag(j), bytes_of(blocks[k]), blocks[k].tensor);
      }
    }
  }

  std::span<std::byte> fused_;
  ElementType type_;
  ReduceOp op_;
  size_t element_bytes_;
  const CollectiveOptions& options_;
  int rank_;
  int size_;
  int next_;
  int prev_;
  BlockPlan plan_;
  detail::Transfers transfers_;
  std::vector<ScratchBuffer<std::byte>> own_staging_;  // used without a workspace
  std::vector<ScratchBuffer<std::byte>*> staging_;     // [peer]: its pushes of this segment
  std::vector<std::vector<size_t>> push_ids_;          // [peer][block of own segment]
  std::vector<std::vector<size_t>> pull_ids_;          // [segment][block]
};

}  // namespace

void allreduce_raw(transport::Context& context, std::span<std::byte> fused, ElementType type,
                   ReduceOp op, std::span<const TensorSlice> tensors,
                   const CollectiveOptions& options) {
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
  if (context.size() == 1) return;
  RawAllreduce(context, fused, type, op, std::move(plan), options).run();
}

}  // namespace threelc::engine
