#include "collectives/ring_allreduce.h"

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

// One call's state: the ring skeleton (segment_ring.h), the block messages and the partial sums
// posted for receipt. Its steps: post_receives(), reduce_scatter(), receive_and_forward().
class RingAllreduce {
 public:
  RingAllreduce(transport::Context& context, BlockPlan plan, BlockCoding coding,
                std::span<float> fused)
      : ring_(context, std::move(plan),
              {.collective = "ring_allreduce",
               .tag_base = coding.options->tag_base,
               .observer = coding.options->observer}),
        blocks_(std::move(coding), ring_.transfers()),
        fused_(fused),
        scattered_in_(static_cast<size_t>(ring_.size())) {}

  void run() {
    ring_.run([this] {
      post_receives();
      reduce_scatter();
      receive_and_forward();
    });
  }

 private:
  // The segment this rank sends on at reduce-scatter step s (0 .. size - 2); at step s it
  // receives segment(s + 1), and segment(size - 1) is its own.
  int step_segment(int s) const {
    return ((ring_.rank() - 1 - s) % ring_.size() + ring_.size()) % ring_.size();
  }

  // Partial sums of every segment but the one this rank starts (in the order the previous rank
  // sends them), then the pulled blocks of every other segment. All before the first send.
  void post_receives() {
    for (int s = 1; s < ring_.size(); ++s) {
      const int j = step_segment(s);
      auto& in = scattered_in_[static_cast<size_t>(j)];
      for (const Block& b : ring_.segment(j)) {
        in.push_back(blocks_.receive(ring_.prev(), ring_.owner_tag(), b));
      }
    }
    ring_.post_pull_receives(
        [this](const Block& b) {
          return std::as_writable_bytes(std::span<uint8_t>(blocks_.buffer_for(b)));
        },
        /*exact=*/false);
  }

  // Encodes fused[b] (with this rank's error feedback at b when compressing).
  std::span<const uint8_t> encode(const Block& b) { return blocks_.encode(b, fused_); }

  // fused[b] += the partial sum that arrived in m (then m's buffer is released).
  void add_incoming(const IncomingBlock& m, const Block& b) {
    blocks_.decode(blocks_.wait(m), b, /*add=*/true, fused_.data() + b.offset, ring_.prev(),
                   "reduce-scatter");
    blocks_.release(m);
  }

  void send_on(std::span<const uint8_t> block, const Block& b) {
    ring_.transfers().send(ring_.next(), ring_.owner_tag(), std::as_bytes(block), b.tensor);
  }

  void reduce_scatter() {
    // Step 0: the segment this rank starts, from its own values.
    for (const Block& b : ring_.segment(step_segment(0))) send_on(encode(b), b);
    // Steps 1 .. size - 2: add own values to the incoming partial sum, re-compress, pass on.
    for (int s = 1; s + 1 < ring_.size(); ++s) {
      const int j = step_segment(s);
      const auto blocks = ring_.segment(j);
      const auto& in = scattered_in_[static_cast<size_t>(j)];
      for (size_t k = 0; k < blocks.size(); ++k) {
        add_incoming(in[k], blocks[k]);
        send_on(encode(blocks[k]), blocks[k]);
      }
    }
    // Own segment: the full sum, compressed once; the decoded values replace this rank's copy
    // and the block starts round the ring.
    const auto blocks = ring_.own_segment();
    const auto& in = scattered_in_[static_cast<size_t>(ring_.rank())];
    for (size_t k = 0; k < blocks.size(); ++k) {
      const Block& b = blocks[k];
      add_incoming(in[k], b);
      const std::span<const uint8_t> out = encode(b);
      if (blocks_.compress()) {
        blocks_.decode(out, b, /*add=*/false, fused_.data() + b.offset, ring_.rank(), "own pull");
      }
      ring_.send_pull(b, std::as_bytes(out));
    }
  }

  // Every other segment in ring order: decode each block in place and forward the same bytes.
  void receive_and_forward() {
    ring_.receive_and_forward([this](const Block& b, std::span<const std::byte> bytes) {
      blocks_.decode(as_block(bytes), b, /*add=*/false, fused_.data() + b.offset, ring_.prev(),
                     "pull");
    });
  }

  SegmentRing ring_;
  BlockMessages blocks_;
  std::span<float> fused_;
  std::vector<std::vector<IncomingBlock>> scattered_in_;  // [segment][block]: partial sums
};

// The checks every overload makes before it touches a residual buffer; the layout's plan.
BlockPlan checked_plan(transport::Context& context, std::span<float> fused,
                       std::span<const TensorSlice> tensors,
                       const CompressedAllreduceOptions& options) {
  if (const cc::Status status = cc::check_encode_options(encode_options(options)); !status.ok()) {
    throw std::invalid_argument("ring_allreduce: " + status.message());
  }
  check_samples(options.feedback, tensors.size(), "ring_allreduce");
  // Validates the layout (and sizes every residual buffer) even where nothing is sent.
  return plan_blocks(fused.size(), tensors, context.size(), options.chunk_bytes);
}

void run_planned(transport::Context& context, BlockPlan plan, std::span<float> fused,
                 std::span<const TensorSlice> tensors, std::span<float* const> residuals,
                 const CompressedAllreduceOptions& options) {
  std::vector<float*> buffers =
      coding_residuals("ring_allreduce", residuals, tensors.size(), options.compress);
  if (context.size() == 1) return;
  HostBlockCodec host;
  // No workspace: the ring allocates its message buffers per call and frees each partial sum
  // once added.
  RingAllreduce(context, std::move(plan),
                {.options = &options,
                 .tensors = tensors,
                 .residuals = std::move(buffers),
                 .codec = options.codec != nullptr ? options.codec : &host,
                 .workspace = nullptr},
                fused)
      .run();
}

}  // namespace

void ring_allreduce_sum(transport::Context& context, std::span<float> fused,
                        std::span<const TensorSlice> tensors, ErrorFeedbackStore& residuals,
                        const CompressedAllreduceOptions& options) {
  BlockPlan plan = checked_plan(context, fused, tensors, options);
  std::vector<float*> buffers;
  if (options.compress) {
    for (const TensorSlice& t : tensors) buffers.push_back(residuals.get(t.name, t.count).data());
  }
  run_planned(context, std::move(plan), fused, tensors, buffers, options);
}

void ring_allreduce_sum(transport::Context& context, std::span<float> fused,
                        std::span<const TensorSlice> tensors, std::span<float* const> residuals,
                        const CompressedAllreduceOptions& options) {
  run_planned(context, checked_plan(context, fused, tensors, options), fused, tensors, residuals,
              options);
}

}  // namespace threelc::engine
