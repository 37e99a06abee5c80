#include "collectives/segment_ring.h"

namespace threelc::engine {

SegmentRing::SegmentRing(transport::Context& context, BlockPlan plan,
                         const SegmentRingOptions& options)
    : rank_(context.rank()),
      size_(context.size()),
      next_((rank_ + 1) % size_),
      prev_((rank_ + size_ - 1) % size_),
      tag_base_(options.tag_base),
      plan_(std::move(plan)),
      transfers_(context, options.observer,
                 std::string(options.collective) + " rank " + std::to_string(rank_)),
      pulled_(static_cast<size_t>(size_)) {}

}  // namespace threelc::engine
