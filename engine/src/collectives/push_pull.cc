// push_pull: the compressed allreduce (docs/DESIGN.md, "The compressed allreduce").
//
// The words as the variables below (and the rest of engine/src/collectives) use them, for a fused
// fp32 buffer of `total` values on N = ring_.size() ranks:
//   segment j   values [segment_start(total, N, j), segment_start(total, N, j + 1)) of the fused
//               buffer; rank j owns it. ring_.segment(j) lists its blocks.
//   chunk       chunk_bytes / 4 consecutive values of a segment, cut from the segment's start
//               (block_plan.h); a chunk never crosses a segment boundary.
//   block       Block{offset, count, tensor}: one chunk's values that belong to one tensor. A
//               block is encoded as one 3LC block (its tiles inside are the codec's business),
//               travels as one message, and has its error feedback where BlockMessages encodes it.
// The skeleton (who owns what, tags, transfers, the pull) is SegmentRing's (segment_ring.h), the
// block messages BlockMessages' (block_messages.h). Each step is a function of that name, called
// in this order by run():
//   post_receives()        every receive, before any send: the push blocks of this rank's own
//                          segment from every peer (pushed_in_), and the pull blocks of every
//                          other segment from the previous rank on the ring (SegmentRing);
//   push()                 for each segment j != rank, nearest successor first: encode its
//                          blocks with this rank's residuals and send them to rank j (owner_tag);
//   reduce_and_send()      for the own segment: start from the own exact values, add each
//                          peer's decoded blocks in rank order, encode the sum once with this
//                          rank's residuals (the second quantization), keep the decoded values
//                          and send the blocks to the next rank (pull_tag(rank));
//   receive_and_forward()  for the other segments, in ring order: decode each pulled block in
//                          place and forward its bytes unchanged unless the next rank owns it.
// Every element is thus quantized twice, once by its pusher and once by its segment's owner.
#include "collectives/push_pull.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "collectives/block_codec.h"
#include "collectives/block_messages.h"
#include "collectives/segment_ring.h"
#include "threelc/compression/codec.h"

namespace threelc::engine {

namespace {

namespace cc = threelc::compression;

// One call's state: the ring skeleton, the block messages and the received pushes.
class PushPull {
 public:
  PushPull(transport::Context& context, BlockPlan plan, BlockCoding coding,
           std::span<const float> input, std::span<float> fused)
      : ring_(context, std::move(plan),
              {.collective = "push_pull",
               .tag_base = coding.options->tag_base,
               .observer = coding.options->observer}),
        blocks_(std::move(coding), ring_.transfers()),
        input_(input),
        fused_(fused),
        pushed_in_(static_cast<size_t>(ring_.size())) {}

  void run() {
    ring_.run([this] {
      post_receives();
      push();
      reduce_and_send();
      receive_and_forward();
    });
  }

 private:
  // Push blocks of this rank's segment from every peer; pull blocks of every other segment
  // from the previous rank on the ring. All before the first send.
  void post_receives() {
    for (int p = 0; p < ring_.size(); ++p) {
      if (p == ring_.rank()) continue;
      auto& in = pushed_in_[static_cast<size_t>(p)];
      for (const Block& b : ring_.own_segment()) {
        in.push_back(blocks_.receive(p, ring_.owner_tag(), b));
      }
    }
    ring_.post_pull_receives(
        [this](const Block& b) {
          return std::as_writable_bytes(std::span<uint8_t>(blocks_.buffer_for(b)));
        },
        /*exact=*/false);
  }

  // Step 1: every other segment's blocks go to their owner, nearest successor first.
  void push() {
    for (int d = 1; d < ring_.size(); ++d) {
      const int j = ring_.rank_after(d);
      for (const Block& b : ring_.segment(j)) {
        ring_.transfers().send(j, ring_.owner_tag(), std::as_bytes(blocks_.encode(b, input_)),
                               b.tensor);
      }
    }
  }

  // Steps 2 and 3 at the owner: own exact values plus the peers' decoded blocks in rank order,
  // then one quantization of the sum, which replaces the own copy and starts round the ring.
  void reduce_and_send() {
    const auto own = ring_.own_segment();
    for (size_t k = 0; k < own.size(); ++k) {
      const Block& b = own[k];
      float* dst = fused_.data() + b.offset;
      if (input_.data() != fused_.data()) {
        blocks_.codec().copy(dst, input_.data() + b.offset, b.count);
      }
      for (int p = 0; p < ring_.size(); ++p) {
        if (p == ring_.rank()) continue;
        const IncomingBlock& m = pushed_in_[static_cast<size_t>(p)][k];
        blocks_.decode(blocks_.wait(m), b, /*add=*/true, dst, p, "push");
        blocks_.release(m);
      }
      const std::span<const uint8_t> out = blocks_.encode(b, fused_);
      if (blocks_.compress()) blocks_.decode(out, b, /*add=*/false, dst, ring_.rank(), "own pull");
      ring_.send_pull(b, std::as_bytes(out));
    }
  }

  // Step 3 elsewhere: decode each segment's blocks in ring order and forward the same bytes.
  void receive_and_forward() {
    ring_.receive_and_forward([this](const Block& b, std::span<const std::byte> bytes) {
      blocks_.decode(as_block(bytes), b, /*add=*/false, fused_.data() + b.offset, ring_.prev(),
                     "pull");
    });
  }

  SegmentRing ring_;
  BlockMessages blocks_;
  std::span<const float> input_;  // what this rank contributes (may be fused_ itself)
  std::span<float> fused_;        // where the result goes
  std::vector<std::vector<IncomingBlock>> pushed_in_;  // [peer][block of own segment]
};

// The checks every overload makes before it touches a residual buffer.
void check_call(size_t input, size_t output, std::span<const TensorSlice> tensors,
                const CompressedAllreduceOptions& options) {
  if (input != output) {
    throw std::invalid_argument("push_pull: input has " + std::to_string(input) +
                                " values, output " + std::to_string(output));
  }
  if (const cc::Status status = cc::check_encode_options(encode_options(options)); !status.ok()) {
    throw std::invalid_argument("push_pull: " + status.message());
  }
  check_samples(options.feedback, tensors.size(), "push_pull");
  check_layout(output, tensors);
}

// push_pull_sum once check_call has passed.
void run_checked(transport::Context& context, std::span<const float> input, std::span<float> fused,
                 std::span<const TensorSlice> tensors, std::span<float* const> residuals,
                 const CompressedAllreduceOptions& options) {
  std::vector<float*> buffers =
      coding_residuals("push_pull", residuals, tensors.size(), options.compress);
  BlockPlan plan = plan_blocks(fused.size(), tensors, context.size(), options.chunk_bytes);
  HostBlockCodec host;
  BlockCodec& codec = options.codec != nullptr ? *options.codec : host;
  if (context.size() == 1) {
    codec.copy(fused.data(), input.data(), fused.size());
    return;
  }
  PushPull(context, std::move(plan),
           {.options = &options,
            .tensors = tensors,
            .residuals = std::move(buffers),
            .codec = &codec,
            .workspace = options.workspace},
           input, fused)
      .run();
}

}  // namespace

void push_pull_sum(transport::Context& context, std::span<float> fused,
                   std::span<const TensorSlice> tensors, ErrorFeedbackStore& residuals,
                   const CompressedAllreduceOptions& options) {
  push_pull_sum(context, fused, fused, tensors, residuals, options);
}

void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> fused, std::span<const TensorSlice> tensors,
                   ErrorFeedbackStore& residuals, const CompressedAllreduceOptions& options) {
  check_call(input.size(), fused.size(), tensors, options);
  std::vector<float*> buffers;
  if (options.compress) {
    for (const TensorSlice& t : tensors) buffers.push_back(residuals.get(t.name, t.count).data());
  }
  run_checked(context, input, fused, tensors, buffers, options);
}

void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> fused, std::span<const TensorSlice> tensors,
                   std::span<float* const> residuals, const CompressedAllreduceOptions& options) {
  check_call(input.size(), fused.size(), tensors, options);
  run_checked(context, input, fused, tensors, residuals, options);
}

}  // namespace threelc::engine
