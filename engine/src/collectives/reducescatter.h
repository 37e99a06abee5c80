// Reduce-scatter of native-dtype values: rank r gets the reduction of everybody's part r.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/collective_error.h"
#include "collectives/collective_options.h"
#include "element_type.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// `input` holds sum(elements_per_rank) elements of `type`: part 0, part 1, ... in rank order
// (parts may be empty; every rank passes the same counts). `out` (elements_per_rank[rank]
// elements, not overlapping `input`) receives x0 op x1 op ... op x(N-1) of everybody's part
// `rank`, folded in rank order (reduce_into) whatever order they arrived in; kAverage is reduced
// as kSum (the caller divides). Every rank sends its part j straight to rank j in chunks of
// options.chunk_bytes (rounded down to whole elements) on tag tag_base (the only tag used).
// Events: send, receive, reduce (tensor 0). Throws std::invalid_argument (counts that do not
// match the spans or size(), overlap, unknown type or op, chunk_bytes below one element),
// CollectiveError (a chunk of the wrong length, naming the peer) or transport::Error.
void reducescatter(transport::Context& context, std::span<const std::byte> input, ElementType type,
                   ReduceOp op, std::span<const size_t> elements_per_rank, std::span<std::byte> out,
                   const CollectiveOptions& options = {});

}  // namespace threelc::engine
