// What the two 3LC allreduces take, push_pull (push_pull.h) and the ring (ring_allreduce.h), and
// how their blocks are encoded under it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/block_codec.h"
#include "collectives/feedback_monitor.h"
#include "collectives/observer.h"
#include "collectives/scratch_buffer.h"
#include "threelc/compression/codec.h"

namespace threelc::engine {

struct CompressedAllreduceOptions {
  bool compress = true;                  // false: raw fp32 blocks, no error feedback
  float sparsity = 1.0f;                 // the 3LC sparsity multiplier s, in [1, 2)
  size_t scale_tile = 0;                 // values per 3LC scale (0: one per block, format v1)
  size_t chunk_bytes = size_t{1} << 20;  // chunk length in bytes of fp32 input
  // Tags used on the data pairs: tag_base (push_pull's push, the ring's reduce-scatter) and
  // tag_base + 1 + j (pull of segment j), so tag_base .. tag_base + size are taken for the
  // duration of the call.
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
inline compression::EncodeOptions encode_options(const CompressedAllreduceOptions& options) {
  return {.sparsity = options.sparsity,
          .isa = compression::Isa::kAuto,
          .scale_tile = options.scale_tile};
}

}  // namespace threelc::engine
