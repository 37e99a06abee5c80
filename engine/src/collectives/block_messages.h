// The messages of a compressed allreduce (push_pull, the ring allreduce): each carries one block
// (block_plan.h) encoded as one 3LC or raw block. BlockMessages gives them their buffers (sized
// for the worst case, from the workspace when there is one), receives them through the call's
// Transfers, and encodes and decodes them through a BlockCodec with the block's residuals,
// compress and decompress events, the error-feedback samples, and errors that name the tensor and
// the peer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "collectives/block_codec.h"
#include "collectives/block_plan.h"
#include "collectives/compressed_allreduce_options.h"
#include "collectives/scratch_buffer.h"
#include "collectives/transfers.h"
#include "threelc/compression/codec.h"

namespace threelc::engine {

// What a compressed allreduce's blocks are encoded with.
struct BlockCoding {
  // compress, sparsity and scale tile (how blocks are encoded), feedback (samples), observer.
  const CompressedAllreduceOptions* options = nullptr;
  std::span<const TensorSlice> tensors;
  std::vector<float*> residuals;  // [tensor]: its residual buffer; nullptr: none (raw blocks)
  BlockCodec* codec = nullptr;
  Workspace* workspace = nullptr;  // keeps message buffers across calls; nullptr: the call's own
};

// The residual of each of `tensors` for BlockCoding::residuals: `residuals` itself when
// compressing (one each), nullptr for every tensor otherwise (`residuals` empty). Throws
// std::invalid_argument naming `collective` when `residuals` does not match.
std::vector<float*> coding_residuals(const char* collective, std::span<float* const> residuals,
                                     size_t tensors, bool compress);

// A block message posted for receipt: its buffer and the Transfers id to wait on.
struct IncomingBlock {
  ScratchBuffer<uint8_t>* buffer = nullptr;
  size_t id = 0;
};

// The encoded block a message holds, as the codec reads it.
inline std::span<const uint8_t> as_block(std::span<const std::byte> message) {
  return {reinterpret_cast<const uint8_t*>(message.data()), message.size()};
}

class BlockMessages {
 public:
  // Receives and errors go through `transfers` (its who() opens the error messages).
  BlockMessages(BlockCoding coding, detail::Transfers& transfers);

  BlockCodec& codec() const { return codec_; }
  bool compress() const { return options_.compress; }

  // A buffer for a message of block `b` (the worst case), valid until the call ends.
  ScratchBuffer<uint8_t>& buffer_for(const Block& b);
  // Posts the receive of a message of block `b` from `peer` (it may be shorter than its buffer).
  IncomingBlock receive(int peer, uint32_t tag, const Block& b);
  // Waits for it; returns the encoded block that came.
  std::span<const uint8_t> wait(const IncomingBlock& m);
  // Frees its buffer once decoded (workspace buffers are kept for the next call).
  void release(const IncomingBlock& m);

  // Encodes source[b] with this rank's residuals at b (when compressing) into a new message;
  // returns the encoded block, valid until the call ends. Throws CollectiveError (peer -1) when
  // the codec fails.
  std::span<const uint8_t> encode(const Block& b, std::span<const float> source);
  // Decodes a message of block `b` from `peer` into dst (add: decode-adds). Throws
  // CollectiveError naming the peer, the tensor and `phase` ("push", "pull", ...) when the block
  // is malformed.
  void decode(std::span<const uint8_t> block, const Block& b, bool add, float* dst, int peer,
              const char* phase);

 private:
  float* residual_at(const Block& b) const;

  const CompressedAllreduceOptions& options_;
  std::span<const TensorSlice> tensors_;
  std::vector<float*> residuals_;
  BlockCodec& codec_;
  Workspace* workspace_;
  detail::Transfers& transfers_;
  compression::EncodeOptions quantize_;             // how compressed blocks are encoded
  size_t buffers_used_ = 0;                         // workspace message buffers handed out so far
  std::deque<ScratchBuffer<uint8_t>> own_buffers_;  // without a workspace; addresses stable
};

}  // namespace threelc::engine
