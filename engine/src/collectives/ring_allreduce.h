// The classic ring allreduce with 3LC (THREELC_ALLREDUCE=ring; docs/DESIGN.md, "The ring
// alternative"): the reduce-scatter re-compresses the partial sum at every hop, so each element
// is quantized N times on the way instead of push_pull's twice. Kept for comparison and for
// ring-only fabrics.
#pragma once

#include <span>

#include "collectives/block_plan.h"
#include "collectives/compressed_allreduce_options.h"
#include "error_feedback.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// Sums `fused` in place across the ranks of `context`; every rank ends with bitwise-identical
// values. Segments and blocks are push_pull's (plan_blocks: segment j, cut at chunk and tensor
// boundaries). Segment j's partial sum starts at rank j + 1 (its own values, compressed with its
// residual buffer there) and travels the ring j + 1 -> j + 2 -> ... -> j: each hop decodes the
// incoming block, adds its own exact values and re-compresses the partial sum with its own
// residual buffer at those positions (tag tag_base, one fixed block order per pair). Rank j, the
// last to add, compresses the full sum once, replaces its copy with the decoded values and
// sends the block on (tag tag_base + 1 + j); every other rank decodes it in place and forwards
// the same bytes unless the next rank is j. Each rank compresses each element once per call,
// so its one residual per element (from `residuals`, by tensor name) holds what that
// compression left out.
// Tags used: tag_base .. tag_base + size().
//
// options.compress == false: raw fp32 blocks, no residuals touched (exact for values whose
// partial sums are exact in fp32). With one rank nothing is quantized or changed. Events as in
// push_pull (compress, decompress, receive, send). Throws std::invalid_argument (bad layout or
// options), CollectiveError (malformed block, naming the peer) or transport::Error.
void ring_allreduce_sum(transport::Context& context, std::span<float> fused,
                        std::span<const TensorSlice> tensors, ErrorFeedbackStore& residuals,
                        const CompressedAllreduceOptions& options = {});
// The same in the memory of options.codec (device memory for the CUDA codec's): `residuals`
// holds each tensor's residual buffer (tensors[i].count elements, in that memory) when compressing,
// and is empty otherwise.
void ring_allreduce_sum(transport::Context& context, std::span<float> fused,
                        std::span<const TensorSlice> tensors, std::span<float* const> residuals,
                        const CompressedAllreduceOptions& options);

}  // namespace threelc::engine
