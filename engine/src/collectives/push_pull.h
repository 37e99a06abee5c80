// The compressed allreduce of docs/DESIGN.md ("The compressed allreduce (push_pull)"): every
// element is quantized twice, once on its way to the rank that owns its segment (push) and once
// on the way back (pull).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "collectives/block_plan.h"
#include "collectives/collective_error.h"
#include "collectives/compressed_allreduce_options.h"
#include "error_feedback.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// Sums `fused` in place across the ranks of `context`; every rank ends with bitwise-identical
// values. `tensors` must tile `fused` in order; their residual buffers come from `residuals`
// (by name). With one rank nothing is quantized: the values stay exact and no residual
// changes. Throws transport::Error (transport failures), CollectiveError (malformed block,
// naming the peer and the codec's message) or std::invalid_argument (bad layout or options).
// When it throws, every request it posted has completed or failed before it returns.
void push_pull_sum(transport::Context& context, std::span<float> fused,
                   std::span<const TensorSlice> tensors, ErrorFeedbackStore& residuals,
                   const CompressedAllreduceOptions& options = {});

// The same with the contribution read from `input` and the result written to `output` (which
// must not overlap unless they are the same span): no copy of the input is made, the owner
// copies only its own segment.
void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> output, std::span<const TensorSlice> tensors,
                   ErrorFeedbackStore& residuals, const CompressedAllreduceOptions& options = {});

// The same in the memory of options.codec (device memory for the CUDA codec's): `residuals`
// holds each tensor's residual buffer (tensors[i].count elements, in that memory) when compressing,
// and is empty otherwise.
void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> output, std::span<const TensorSlice> tensors,
                   std::span<float* const> residuals, const CompressedAllreduceOptions& options);

}  // namespace threelc::engine
