// The skeleton the three allreduces that own segments share: push_pull (3LC), the ring allreduce
// (3LC, THREELC_ALLREDUCE=ring) and the raw allreduce. Each cuts the fused buffer into one
// segment per rank (block_plan.h; rank j owns segment j), brings every segment's values to its
// owner on tag tag_base (push_pull and the raw allreduce push them there directly, the ring
// passes partial sums along), has the owner reduce them, and ends with the same pull: the owner
// starts its finished blocks round the ring on tag tag_base + 1 + j, j -> j + 1 -> ... -> j - 1,
// and every other rank stores each block and forwards the same bytes unless the next rank is the
// owner. SegmentRing holds where this rank sits on the ring, the plan, the tags, the call's
// Transfers and that pull; each allreduce adds what it does to the values.
//
// Every receive is posted before the first send, and each (pair, tag) carries one fixed block
// order, so receivers can post matching receives up front; pulled segments are consumed in ring
// distance order (nearest owner first), so no two ranks wait on each other in a cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives/block_plan.h"
#include "collectives/observer.h"
#include "collectives/transfers.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

struct SegmentRingOptions {
  // Names this rank in errors: "<collective> rank <r>: ..." ("push_pull", "ring_allreduce",
  // "allreduce_raw").
  const char* collective = "";
  // tag_base: what travels to a segment's owner; tag_base + 1 + j: segment j's pull. A call takes
  // tag_base .. tag_base + size().
  uint32_t tag_base = 0;
  CollectiveObserver* observer = nullptr;  // send and receive events; nullptr: none
};

class SegmentRing {
 public:
  SegmentRing(transport::Context& context, BlockPlan plan, const SegmentRingOptions& options);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int next() const { return next_; }  // where pulled blocks go
  int prev() const { return prev_; }  // where pulled blocks come from
  std::span<const Block> segment(int j) const { return plan_.segment(j); }
  std::span<const Block> own_segment() const { return plan_.segment(rank_); }

  uint32_t owner_tag() const { return tag_base_; }
  uint32_t pull_tag(int segment) const { return tag_base_ + 1 + static_cast<uint32_t>(segment); }
  // The rank `distance` places after this one (distance 1 .. size() - 1): pushes go to their
  // owners in this order, nearest successor first.
  int rank_after(int distance) const { return (rank_ + distance) % size_; }
  // The segment this rank pulls `distance`-th (distance 1 .. size() - 1): the one whose owner is
  // `distance` places before it, the order in which the previous rank sends them.
  int pulled_segment(int distance) const { return (rank_ + size_ - distance) % size_; }

  detail::Transfers& transfers() { return transfers_; }
  const std::string& who() const { return transfers_.who(); }  // "<collective> rank <r>"

  // Runs the call's steps, then waits for every send; after a failure every posted request
  // finishes before the exception leaves (Transfers::run).
  template <typename Steps>
  void run(Steps&& steps) {
    transfers_.run(std::forward<Steps>(steps));
  }

  // The pull, 1: posts the receive of every block of every other segment from the previous
  // rank, segments in pull order, blocks in plan order. `into(block)` gives the buffer
  // (std::span<std::byte>) the block lands in, which must stay until the call ends; with `exact`
  // the message must fill it, without it may be shorter (a compressed block).
  template <typename Into>
  void post_pull_receives(Into&& into, bool exact) {
    for (int d = 1; d < size_; ++d) {
      const int j = pulled_segment(d);
      auto& in = pulled_[static_cast<size_t>(j)];
      for (const Block& b : plan_.segment(j)) {
        const std::span<std::byte> buffer = into(b);
        in.push_back(
            Pulled{transfers_.receive(prev_, pull_tag(j), buffer, b.tensor, exact), buffer});
      }
    }
  }

  // The pull, 2, at the owner: starts its finished block `b` round the ring (`bytes` stay
  // unchanged until the call ends).
  void send_pull(const Block& b, std::span<const std::byte> bytes) {
    transfers_.send(next_, pull_tag(rank_), bytes, b.tensor);
  }

  // The pull, 3, everywhere else: every other segment in pull order, each block as it arrives:
  // `arrived(block, bytes)` with the bytes that came (std::span<const std::byte>), which then go
  // on unchanged to the next rank unless it owns the segment.
  template <typename Arrived>
  void receive_and_forward(Arrived&& arrived) {
    for (int d = 1; d < size_; ++d) {
      const int j = pulled_segment(d);
      const auto blocks = plan_.segment(j);
      const auto& in = pulled_[static_cast<size_t>(j)];
      for (size_t k = 0; k < blocks.size(); ++k) {
        const std::span<const std::byte> bytes = in[k].buffer.first(transfers_.wait(in[k].id));
        arrived(blocks[k], bytes);
        if (next_ != j) transfers_.send(next_, pull_tag(j), bytes, blocks[k].tensor);
      }
    }
  }

 private:
  // A posted pull receive: its Transfers id and the buffer it lands in.
  struct Pulled {
    size_t id = 0;
    std::span<std::byte> buffer;
  };

  int rank_;
  int size_;
  int next_;
  int prev_;
  uint32_t tag_base_;
  BlockPlan plan_;
  detail::Transfers transfers_;
  std::vector<std::vector<Pulled>> pulled_;  // [segment][block]
};

}  // namespace threelc::engine
