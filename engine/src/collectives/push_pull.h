// The compressed allreduce of docs/DESIGN.md ("The compressed allreduce (push_pull)"): every
// element is quantized twice, once on its way to the rank that owns its segment (push) and once
// on the way back (pull).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "collectives/block_codec.h"
#include "collectives/block_plan.h"
#include "collectives/collective_error.h"
#include "collectives/feedback_monitor.h"
#include "collectives/observer.h"
#include "collectives/scratch_buffer.h"
#include "error_feedback.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

struct PushPullOptions {
  bool compress = true;                  // false: raw fp32 blocks, no error feedback
  float sparsity = 1.0f;                 // the 3LC sparsity multiplier s, in [1, 2)
  size_t scale_tile = 0;                 // values per 3LC scale (0: one per block, format v1)
  size_t chunk_bytes = size_t{1} << 20;  // chunk length in bytes of fp32 input
  // Tags used on the data pairs: tag_base (push) and tag_base + 1 + j (pull of segment j), so
  // tag_base .. tag_base + size are taken for the duration of the call.
  uint32_t tag_base = 0x1000;
  // Records compress (encode), decompress (decode, decode-add), receive (each wait for a
  // message) and send (from post to the wait that sees it complete) events; nullptr: none.
  CollectiveObserver* observer = nullptr;
  // Where message buffers come from (kept across calls); nullptr: allocated for the call.
  Workspace* workspace = nullptr;
  // Empty, or one entry per tensor: what the call saw of each tensor's error feedback on this
  // rank (feedback_monitor.h; raw blocks always, magnitudes where `measure` is set and the
  // codec's values are host memory).
  std::span<FeedbackSample> feedback;
  // Encodes and decodes where the values live; nullptr: the CPU codec on host memory.
  BlockCodec* codec = nullptr;
};

// How compressed blocks are encoded under `options` (sparsity, scale tile; the CPU's best ISA).
inline compression::EncodeOptions encode_options(const PushPullOptions& options) {
  return {.sparsity = options.sparsity,
          .isa = compression::Isa::kAuto,
          .scale_tile = options.scale_tile};
}

// Sums `fused` in place across the ranks of `context`; every rank ends with bitwise-identical
// values. `tensors` must tile `fused` in order; their residual buffers come from `residuals`
// (by name). With one rank nothing is quantized: the values stay exact and no residual
// changes. Throws transport::Error (transport failures), CollectiveError (malformed block,
// naming the peer and the codec's message) or std::invalid_argument (bad layout or options).
// When it throws, every request it posted has completed or failed before it returns.
void push_pull_sum(transport::Context& context, std::span<float> fused,
                   std::span<const TensorSlice> tensors, ErrorFeedbackStore& residuals,
                   const PushPullOptions& options = {});

// The same with the contribution read from `input` and the result written to `output` (which
// must not overlap unless they are the same span): no copy of the input is made, the owner
// copies only its own segment.
void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> output, std::span<const TensorSlice> tensors,
                   ErrorFeedbackStore& residuals, const PushPullOptions& options = {});

// The same in the memory of options.codec (device memory for the CUDA codec's): `residuals`
// holds each tensor's residual buffer (tensors[i].count elements, in that memory) when compressing,
// and is empty otherwise.
void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> output, std::span<const TensorSlice> tensors,
                   std::span<float* const> residuals, const PushPullOptions& options);

}  // namespace threelc::engine
