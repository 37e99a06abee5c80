// THREELC_HIERARCHICAL: a compressed allreduce on H hosts of L ranks each, in three steps.
//
//   1. local reduce-scatter: the L ranks of a host sum their fused fp32 buffers exactly; the
//      buffer is cut into L segments and local rank i ends with segment i of its host's sum;
//   2. cross sum: the H ranks holding segment i (one per host) sum it with 3LC push_pull (or
//      the ring), each keeping its own error feedback for the pieces of tensors in its segment;
//   3. local allgather: the ranks of each host gather the L summed segments.
//
// Only step 2 crosses hosts, and every host sends the compressed volume of one buffer there,
// where the flat push_pull has each of its L ranks send about that much. Steps 1 and 3 are
// exact and go through a LocalExchange: the engine's reducescatter and allgather over a
// RankSubset for host memory (HostLocalExchange), NCCL for device memory (gpu/).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "collectives/block_plan.h"  // TensorSlice
#include "collectives/collective_error.h"
#include "collectives/collective_options.h"
#include "collectives/rank_subset.h"
#include "collectives/scratch_buffer.h"

namespace threelc::engine {

// Steps 1 and 3 among the ranks of one host.
class LocalExchange {
 public:
  virtual ~LocalExchange() = default;
  // Sums every local rank's `values` (segment lengths `counts`, in local rank order) and
  // returns this rank's segment of the sum: `values`' own segment (in place) or a buffer of
  // the exchange's, valid until the next call.
  virtual std::span<const float> reduce_scatter(std::span<const float> values,
                                                std::span<const size_t> counts) = 0;
  // Gathers every local rank's segment of `values` into everybody's `values`, in place.
  virtual void allgather(std::span<float> values, std::span<const size_t> counts) = 0;
};

// LocalExchange for host memory: reducescatter (tag options.tag_base) and allgatherv (tag
// options.tag_base + 1) among `local`. Transport errors name the job's rank; CollectiveErrors
// are rethrown naming the job's rank too.
class HostLocalExchange : public LocalExchange {
 public:
  HostLocalExchange(RankSubset& local, const CollectiveOptions& options)
      : local_(local), options_(options) {}
  std::span<const float> reduce_scatter(std::span<const float> values,
                                        std::span<const size_t> counts) override;
  void allgather(std::span<float> values, std::span<const size_t> counts) override;
  // Where the next calls record their events (nullptr: nowhere).
  void observe(CollectiveObserver* observer) { options_.observer = observer; }

 private:
  RankSubset& local_;
  CollectiveOptions options_;
  ScratchBuffer<std::byte> segment_;
};

// This rank's share of a hierarchical allreduce of a fused buffer.
struct HierarchicalSegment {
  std::vector<size_t> counts;  // every local rank's segment length, in local rank order
  size_t offset = 0;           // where this rank's segment starts in the fused buffer
  size_t count = 0;
  // The pieces of the fused tensors inside this segment, offsets relative to it; each is
  // named "<tensor>#<first>+<count>" (its element range in the tensor) so that it keeps its
  // own error feedback. A stretch beyond the last tensor (padding) is a piece named "#padding".
  std::vector<TensorSlice> slices;
};

// `tensors` tile a fused buffer of `total` elements (total may exceed their sum: padding),
// cut into `parts` segments as equal as possible (the first total % parts one longer);
// `index` picks this rank's.
HierarchicalSegment hierarchical_segment(std::span<const TensorSlice> tensors, size_t total,
                                         size_t parts, size_t index);

// Runs the three steps on `values` (this rank's fused buffer in, the job's sum out).
// `cross_sum(input, output)` is step 2: it must sum `input` (this rank's segment of its host's
// sum, segment.count elements) across hosts into `output` (the segment's place in `values`).
template <typename CrossSum>
void hierarchical_sum(LocalExchange& local, std::span<float> values,
                      const HierarchicalSegment& segment, CrossSum&& cross_sum) {
  const std::span<const float> host_sum = local.reduce_scatter(values, segment.counts);
  // Every rank of the cross group holds a segment of the same length: all skip an empty one.
  if (segment.count > 0) cross_sum(host_sum, values.subspan(segment.offset, segment.count));
  local.allgather(values, segment.counts);
}

}  // namespace threelc::engine
