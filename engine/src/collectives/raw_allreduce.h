// Allreduce of native-dtype values without compression, for integer tensors, ops other than
// sum / average and tensors too small to compress: the scatter / reduce / gather shape of
// push_pull (docs/DESIGN.md, "The raw allreduce"), moving the values' own bytes.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/block_plan.h"
#include "collectives/collective_error.h"
#include "collectives/collective_options.h"
#include "element_type.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// Reduces `fused` (fused.size() / element_size(type) elements of `type`) in place across the
// ranks of `context`; every rank ends with bitwise-identical bytes.
//
// The buffer is split into size() segments (segment_start()); rank j owns segment j. Every rank
// sends its bytes of segment j to rank j in chunks of options.chunk_bytes (rounded down to
// whole elements, cut from each segment's start; chunks ignore tensor boundaries, so many small
// fused tensors travel in few messages; an event names the tensor holding the chunk's first
// element), tag tag_base. The owner folds the ranks' values in rank order, x0 op x1 op ... op
// x(N-1) (each step reduce_into), whatever order they arrived in, so the result equals that
// sequential fold on every rank; kAverage is reduced as kSum (the caller divides). The owner then
// sends each reduced chunk to the next rank on the ring, tag tag_base + 1 + j, which stores it and
// forwards the same bytes unless the next rank is the owner. Tags used: tag_base .. tag_base +
// size().
//
// `tensors` (offsets and counts in elements) must tile the buffer in order with distinct names;
// an empty list stands for one tensor covering it (index 0 in events). With one rank nothing
// changes. Events: send, receive, reduce (bytes = the chunk's bytes times N - 1).
// Throws std::invalid_argument (buffer not a whole number of elements, bad layout, chunk_bytes
// below one element, unknown type or op), CollectiveError (a message of the wrong length, naming
// the peer) or transport::Error.
void allreduce_raw(transport::Context& context, std::span<std::byte> fused, ElementType type,
                   ReduceOp op, std::span<const TensorSlice> tensors,
                   const CollectiveOptions& options = {});

// The same reduction of `input` (this rank's values, as many bytes as `fused`, not written) into
// `fused`: the pushes are sent from the input, and the owner folds its own values from it, so
// the caller copies nothing first. The result is the same bytes as copying `input` into `fused`
// and reducing that in place.
void allreduce_raw(transport::Context& context, std::span<const std::byte> input,
                   std::span<std::byte> fused, ElementType type, ReduceOp op,
                   std::span<const TensorSlice> tensors, const CollectiveOptions& options = {});

}  // namespace threelc::engine
