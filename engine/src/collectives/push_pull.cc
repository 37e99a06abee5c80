// push_pull: the compressed allreduce (docs/DESIGN.md, "The compressed allreduce").
//
// The words as the variables below use them, for a fused fp32 buffer of `total` values on
// N = size_ ranks:
//   segment j   values [segment_start(total, N, j), segment_start(total, N, j + 1)) of the fused
//               buffer; rank j owns it. plan_.segment(j) lists its blocks.
//   chunk       chunk_bytes / 4 consecutive values of a segment, cut from the segment's start
//               (block_plan.h); a chunk never crosses a segment boundary.
//   block       Block{offset, count, tensor}: one chunk's values that belong to one tensor. A
//               block is encoded as one 3LC block (its tiles inside are the codec's business),
//               travels as one Message, and has its error feedback at error_at(block).
// Each step is a function of that name, called in this order by run():
//   post_receives()        every receive, before any send: the push blocks of this rank's own
//                          segment from every peer (pushed_in_), and the pull blocks of every
//                          other segment from the previous rank on the ring (pulled_in_);
//   push()                 for each segment j != rank_, nearest successor first: encode its
//                          blocks with this rank's residuals and send them to rank j (push_tag);
//   reduce_and_send()      for the own segment: start from the own exact values, add each
//                          peer's decoded blocks in rank order, encode the sum once with this
//                          rank's residuals (the second quantization), keep the decoded values
//                          and send the blocks to the next rank (pull_tag(rank_));
//   receive_and_forward()  for the other segments, in ring order: decode each pulled block in
//                          place and forward its bytes unchanged unless the next rank owns it.
// Every element is thus quantized twice, once by its pusher and once by its segment's owner.
#include "collectives/push_pull.h"

#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "collectives/block_codec.h"
#include "collectives/scratch_buffer.h"
#include "threelc/compression/codec.h"

namespace threelc::engine {

namespace {

namespace cc = threelc::compression;

struct Message {
  ScratchBuffer<uint8_t> own;            // used without a workspace
  ScratchBuffer<uint8_t>* bytes = &own;  // set when the message gets its buffer
  size_t size = 0;
  transport::Request request;
};

// A posted send and what its event reports once it is seen complete.
struct Send {
  transport::Request request;
  int64_t posted_ns = 0;
  size_t bytes = 0;
  int peer = -1;
  size_t tensor = 0;
};

// The encoded block a message holds (its buffer is sized for the worst case).
std::span<const uint8_t> bytes_of(const Message& m) { return {m.bytes->data(), m.size}; }

// One call's state: the plan, every posted request and the buffers they point into.
class PushPull {
 public:
  PushPull(transport::Context& context, std::span<const float> input, std::span<float> fused,
           std::span<const TensorSlice> tensors, BlockPlan plan, std::vector<float*> errors,
           BlockCodec& codec, const PushPullOptions& options)
      : ctx_(context),
        codec_(codec),
        input_(input),
        fused_(fused),
        tensors_(tensors),
        errors_(std::move(errors)),
        options_(options),
        rank_(context.rank()),
        size_(context.size()),
        next_((rank_ + 1) % size_),
        prev_((rank_ + size_ - 1) % size_),
        plan_(std::move(plan)),
        quantize_(encode_options(options)),
        pushed_in_(static_cast<size_t>(size_)),
        pulled_in_(static_cast<size_t>(size_)) {}

  void run() {
    try {
      post_receives();
      push();
      reduce_and_send();
      receive_and_forward();
      for (auto& s : sends_) {
        s.request.wait();
        record(Phase::kSend, s.tensor, s.posted_ns, s.bytes, s.peer);
      }
    } catch (...) {
      drain();
      throw;
    }
  }

 private:
  uint32_t push_tag() const { return options_.tag_base; }
  uint32_t pull_tag(int segment) const {
    return options_.tag_base + 1 + static_cast<uint32_t>(segment);
  }
  int ring_segment(int distance) const { return (rank_ + size_ - distance) % size_; }

  int64_t start() const { return detail::event_start(options_.observer); }
  void record(Phase phase, size_t tensor, int64_t begin, size_t bytes, int peer = -1) const {
    detail::record_event(options_.observer, phase, tensor, begin, bytes, peer);
  }

  // Waits for a posted receive (a kReceive event) and keeps its length.
  void wait_for(Message& m, int peer, const Block& b) const {
    const int64_t begin = start();
    m.size = m.request.wait();
    record(Phase::kReceive, b.tensor, begin, m.size, peer);
  }

  float* error_at(const Block& b) const {
    float* e = errors_[b.tensor];
    return e == nullptr ? nullptr : e + (b.offset - tensors_[b.tensor].offset);
  }

  void post_receive(int peer, uint32_t tag, const Block& b, Message& m) {
    m.request =
        ctx_.pair(peer).recv(tag, std::as_writable_bytes(std::span<uint8_t>(buffer_for(m, b))));
  }

  // Push blocks of this rank's segment from every peer; pull blocks of every other segment
  // from the previous rank on the ring. All before the first send.
  void post_receives() {
    const auto own = plan_.segment(rank_);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      auto& in = pushed_in_[static_cast<size_t>(p)];
      in.resize(own.size());
      for (size_t k = 0; k < own.size(); ++k) post_receive(p, push_tag(), own[k], in[k]);
    }
    for (int d = 1; d < size_; ++d) {
      const int j = ring_segment(d);
      const auto blocks = plan_.segment(j);
      auto& in = pulled_in_[static_cast<size_t>(j)];
      in.resize(blocks.size());
      for (size_t k = 0; k < blocks.size(); ++k) post_receive(prev_, pull_tag(j), blocks[k], in[k]);
    }
  }

  // Gives m a buffer for a block of b (the worst case), from the workspace when there is one.
  ScratchBuffer<uint8_t>& buffer_for(Message& m, const Block& b) {
    const size_t n = cc::max_block_bytes(b.count);
    m.bytes = options_.workspace ? &options_.workspace->message(buffers_used_++, n) : &m.own;
    m.bytes->resize(n);
    return *m.bytes;
  }

  // Encodes source[b] (with error feedback at b when compressing) into a new message.
  Message& encode(const Block& b, float* error, std::span<const float> source) {
    Message& m = outgoing_.emplace_back();
    ScratchBuffer<uint8_t>& out = buffer_for(m, b);
    const float* values = source.data() + b.offset;
    FeedbackSample* sample = sample_of(options_.feedback, options_.compress, b.tensor);
    // Magnitudes are measured only where the CPU can read the values and residuals.
    if (sample != nullptr && !codec_.host_values()) sample->measure = false;
    const float input_max = measure_input(sample, cc::Values{values, cc::DType::kFloat32, b.count});
    const int64_t begin = start();
    cc::EncodedBlock result;
    const cc::Status status = codec_.encode(values, b.count, error,
                                            options_.compress ? &quantize_ : nullptr, out, &result);
    if (!status.ok()) {
      throw CollectiveError(-1, "push_pull rank " + std::to_string(rank_) + ": encoding tensor '" +
                                    tensors_[b.tensor].name + "' failed: " + status.message());
    }
    m.size = result.bytes;
    record(Phase::kCompress, b.tensor, begin, m.size);
    measure_encoded(sample, result, input_max, error, b.count);
    return m;
  }

  void send(int peer, uint32_t tag, const Message& m, const Block& b) {
    const int64_t begin = start();
    sends_.push_back(
        Send{ctx_.pair(peer).send(tag, std::as_bytes(bytes_of(m))), begin, m.size, peer, b.tensor});
  }

  // Step 1: every other segment's blocks go to their owner, nearest successor first.
  void push() {
    for (int d = 1; d < size_; ++d) {
      const int j = (rank_ + d) % size_;
      for (const Block& b : plan_.segment(j)) {
        send(j, push_tag(), encode(b, error_at(b), input_), b);
      }
    }
  }

  void check(const cc::Status& status, int peer, const Block& b, const char* phase) const {
    if (status.ok()) return;
    throw CollectiveError(peer, "push_pull rank " + std::to_string(rank_) + ": malformed " + phase +
                                    " block from rank " + std::to_string(peer) + " (tensor '" +
                                    tensors_[b.tensor].name + "', " + std::to_string(b.count) +
                                    " values at offset " + std::to_string(b.offset) +
                                    "): " + status.message());
  }

  // Steps 2 and 3 at the owner: own exact values plus the peers' decoded blocks in rank order,
  // then one quantization of the sum, which replaces the own copy and starts round the ring.
  void reduce_and_send() {
    const auto own = plan_.segment(rank_);
    for (size_t k = 0; k < own.size(); ++k) {
      const Block& b = own[k];
      float* dst = fused_.data() + b.offset;
      if (input_.data() != fused_.data()) codec_.copy(dst, input_.data() + b.offset, b.count);
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        Message& m = pushed_in_[static_cast<size_t>(p)][k];
        wait_for(m, p, b);
        const int64_t begin = start();
        check(codec_.decode(bytes_of(m), b.count, true, dst), p, b, "push");
        record(Phase::kDecompress, b.tensor, begin, m.size);
        if (m.bytes == &m.own) m.own.release();
      }
      const Message& out = encode(b, error_at(b), fused_);
      if (options_.compress) {
        const int64_t begin = start();
        check(codec_.decode(bytes_of(out), b.count, false, dst), rank_, b, "own pull");
        record(Phase::kDecompress, b.tensor, begin, out.size);
      }
      send(next_, pull_tag(rank_), out, b);
    }
  }

  // Step 3 elsewhere: decode each segment's blocks in ring order and forward the same bytes.
  void receive_and_forward() {
    for (int d = 1; d < size_; ++d) {
      const int j = ring_segment(d);
      const auto blocks = plan_.segment(j);
      auto& in = pulled_in_[static_cast<size_t>(j)];
      for (size_t k = 0; k < blocks.size(); ++k) {
        Message& m = in[k];
        wait_for(m, prev_, blocks[k]);
        const int64_t begin = start();
        check(codec_.decode(bytes_of(m), blocks[k].count, false, fused_.data() + blocks[k].offset),
              prev_, blocks[k], "pull");
        record(Phase::kDecompress, blocks[k].tensor, begin, m.size);
        if (next_ != j) send(next_, pull_tag(j), m, blocks[k]);
      }
    }
  }

  // After a failure: let every posted request finish or fail before its buffer goes away.
  void drain() noexcept {
    auto settle = [](transport::Request& r) {
      try {
        r.wait();
      } catch (...) {
      }
    };
    for (auto& in : pushed_in_)
      for (auto& m : in) settle(m.request);
    for (auto& in : pulled_in_)
      for (auto& m : in) settle(m.request);
    for (auto& s : sends_) settle(s.request);
  }

  transport::Context& ctx_;
  BlockCodec& codec_;
  size_t buffers_used_ = 0;       // workspace message buffers handed out so far
  std::span<const float> input_;  // what this rank contributes (may be fused_ itself)
  std::span<float> fused_;        // where the result goes
  std::span<const TensorSlice> tensors_;
  std::vector<float*> errors_;
  const PushPullOptions& options_;
  int rank_;
  int size_;
  int next_;
  int prev_;
  BlockPlan plan_;
  cc::EncodeOptions quantize_;                   // how compressed blocks are encoded
  std::vector<std::vector<Message>> pushed_in_;  // [peer][block of own segment]
  std::vector<std::vector<Message>> pulled_in_;  // [segment][block]
  std::deque<Message> outgoing_;                 // stable addresses while sends are in flight
  std::vector<Send> sends_;
};

// The checks every overload makes before it touches an error buffer.
void check_call(size_t input, size_t output, std::span<const TensorSlice> tensors,
                const PushPullOptions& options) {
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

}  // namespace

void push_pull_sum(transport::Context& context, std::span<float> fused,
                   std::span<const TensorSlice> tensors, ErrorFeedbackStore& errors,
                   const PushPullOptions& options) {
  push_pull_sum(context, fused, fused, tensors, errors, options);
}

void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> fused, std::span<const TensorSlice> tensors,
                   ErrorFeedbackStore& errors, const PushPullOptions& options) {
  check_call(input.size(), fused.size(), tensors, options);
  std::vector<float*> buffers;
  if (options.compress) {
    for (const TensorSlice& t : tensors) buffers.push_back(errors.get(t.name, t.count).data());
  }
  push_pull_sum(context, input, fused, tensors, buffers, options);
}

void push_pull_sum(transport::Context& context, std::span<const float> input,
                   std::span<float> fused, std::span<const TensorSlice> tensors,
                   std::span<float* const> errors, const PushPullOptions& options) {
  check_call(input.size(), fused.size(), tensors, options);
  if (options.compress ? errors.size() != tensors.size() : !errors.empty()) {
    throw std::invalid_argument("push_pull: " + std::to_string(errors.size()) +
                                " error buffers for " + std::to_string(tensors.size()) +
                                " tensors (one each when compressing, none otherwise)");
  }
  BlockPlan plan = plan_blocks(fused.size(), tensors, context.size(), options.chunk_bytes);
  HostBlockCodec host;
  BlockCodec& codec = options.codec != nullptr ? *options.codec : host;
  if (context.size() == 1) {
    codec.copy(fused.data(), input.data(), fused.size());
    return;
  }
  std::vector<float*> buffers(errors.begin(), errors.end());
  if (buffers.empty()) buffers.assign(tensors.size(), nullptr);
  PushPull(context, input, fused, tensors, std::move(plan), std::move(buffers), codec, options)
      .run();
}

}  // namespace threelc::engine
