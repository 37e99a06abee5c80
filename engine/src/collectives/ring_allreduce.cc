#include "collectives/ring_allreduce.h"

#include <deque>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collective_options.h"
#include "collectives/scratch_buffer.h"
#include "threelc/compression/codec.h"

namespace threelc::engine {

namespace {

namespace cc = threelc::compression;

// A received or encoded block; its buffer is sized for the worst case.
struct Message {
  ScratchBuffer<uint8_t> bytes;
  size_t size = 0;
  size_t id = 0;  // receive: the Transfers id
};

std::span<const uint8_t> bytes_of(const Message& m) { return {m.bytes.data(), m.size}; }

class RingAllreduce {
 public:
  RingAllreduce(transport::Context& context, std::span<float> fused,
                std::span<const TensorSlice> tensors, BlockPlan plan, std::vector<float*> errors,
                const PushPullOptions& options)
      : fused_(fused),
        tensors_(tensors),
        errors_(std::move(errors)),
        options_(options),
        rank_(context.rank()),
        size_(context.size()),
        next_((rank_ + 1) % size_),
        prev_((rank_ + size_ - 1) % size_),
        plan_(std::move(plan)),
        transfers_(context, options.observer, "ring_allreduce rank " + std::to_string(rank_)),
        scattered_in_(static_cast<size_t>(size_)),
        pulled_in_(static_cast<size_t>(size_)) {}

  void run() {
    transfers_.run([this] {
      post_receives();
      reduce_scatter();
      receive_and_forward();
    });
  }

 private:
  uint32_t scatter_tag() const { return options_.tag_base; }
  uint32_t pull_tag(int segment) const {
    return options_.tag_base + 1 + static_cast<uint32_t>(segment);
  }
  // The segment this rank sends on at reduce-scatter step s (0 .. size - 2); at step s it
  // receives segment(s + 1), and segment(size - 1) is its own.
  int step_segment(int s) const { return ((rank_ - 1 - s) % size_ + size_) % size_; }
  int ring_segment(int distance) const { return (rank_ + size_ - distance) % size_; }
  int64_t start() const { return detail::event_start(options_.observer); }
  void record(Phase phase, size_t tensor, int64_t begin, size_t bytes) const {
    detail::record_event(options_.observer, phase, tensor, begin, bytes);
  }

  float* error_at(const Block& b) const {
    float* e = errors_[b.tensor];
    return e == nullptr ? nullptr : e + (b.offset - tensors_[b.tensor].offset);
  }

  void post_receive(int peer, uint32_t tag, const Block& b, Message& m) {
    m.bytes.resize(cc::max_block_bytes(b.count));
    m.id = transfers_.receive(peer, tag, std::as_writable_bytes(std::span<uint8_t>(m.bytes)),
                              b.tensor, /*exact=*/false);
  }

  // Partial sums of every segment but the one this rank starts (in the order the previous rank
  // sends them), then the pulled blocks of every other segment. All before the first send.
  void post_receives() {
    for (int s = 1; s < size_; ++s) {
      const int j = step_segment(s);
      const auto blocks = plan_.segment(j);
      auto& in = scattered_in_[static_cast<size_t>(j)];
      in.resize(blocks.size());
      for (size_t k = 0; k < blocks.size(); ++k)
        post_receive(prev_, scatter_tag(), blocks[k], in[k]);
    }
    for (int d = 1; d < size_; ++d) {
      const int j = ring_segment(d);
      const auto blocks = plan_.segment(j);
      auto& in = pulled_in_[static_cast<size_t>(j)];
      in.resize(blocks.size());
      for (size_t k = 0; k < blocks.size(); ++k) post_receive(prev_, pull_tag(j), blocks[k], in[k]);
    }
  }

  // Encodes fused[b] (with this rank's error feedback at b when compressing).
  Message& encode(const Block& b) {
    Message& m = outgoing_.emplace_back();
    m.bytes.resize(cc::max_block_bytes(b.count));
    const cc::Values values{fused_.data() + b.offset, cc::DType::kFloat32, b.count};
    FeedbackSample* sample = sample_of(options_.feedback, options_.compress, b.tensor);
    const float input_max = measure_input(sample, values);
    const int64_t begin = start();
    cc::EncodedBlock result;
    const cc::Status status =
        options_.compress
            ? cc::encode(values, error_at(b), encode_options(options_), m.bytes, &result)
            : cc::encode_raw(values, m.bytes, &result);
    if (!status.ok()) {
      throw CollectiveError(-1, "ring_allreduce rank " + std::to_string(rank_) +
                                    ": encoding tensor '" + tensors_[b.tensor].name +
                                    "' failed: " + status.message());
    }
    m.size = result.bytes;
    record(Phase::kCompress, b.tensor, begin, m.size);
    measure_encoded(sample, result, input_max, error_at(b), b.count);
    return m;
  }

  void send(int peer, uint32_t tag, const Message& m, const Block& b) {
    transfers_.send(peer, tag, std::as_bytes(bytes_of(m)), b.tensor);
  }

  void check(const cc::Status& status, int peer, const Block& b, const char* phase) const {
    if (status.ok()) return;
    throw CollectiveError(peer, "ring_allreduce rank " + std::to_string(rank_) + ": malformed " +
                                    phase + " block from rank " + std::to_string(peer) +
                                    " (tensor '" + tensors_[b.tensor].name + "', " +
                                    std::to_string(b.count) + " values at offset " +
                                    std::to_string(b.offset) + "): " + status.message());
  }

  // fused[b] += the partial sum that arrived in m (then m's buffer is released).
  void add_incoming(Message& m, const Block& b) {
    m.size = transfers_.wait(m.id);
    const int64_t begin = start();
    check(cc::decode_add(bytes_of(m), b.count, 1.0f, fused_.data() + b.offset), prev_, b,
          "reduce-scatter");
    record(Phase::kDecompress, b.tensor, begin, m.size);
    m.bytes.release();
  }

  void reduce_scatter() {
    // Step 0: the segment this rank starts, from its own values.
    for (const Block& b : plan_.segment(step_segment(0))) send(next_, scatter_tag(), encode(b), b);
    // Steps 1 .. size - 2: add own values to the incoming partial sum, re-compress, pass on.
    for (int s = 1; s + 1 < size_; ++s) {
      const int j = step_segment(s);
      const auto blocks = plan_.segment(j);
      auto& in = scattered_in_[static_cast<size_t>(j)];
      for (size_t k = 0; k < blocks.size(); ++k) {
        add_incoming(in[k], blocks[k]);
        send(next_, scatter_tag(), encode(blocks[k]), blocks[k]);
      }
    }
    // Own segment: the full sum, compressed once; the decoded values replace this rank's copy
    // and the block starts round the ring.
    const auto blocks = plan_.segment(rank_);
    auto& in = scattered_in_[static_cast<size_t>(rank_)];
    for (size_t k = 0; k < blocks.size(); ++k) {
      const Block& b = blocks[k];
      add_incoming(in[k], b);
      const Message& out = encode(b);
      if (options_.compress) {
        const int64_t begin = start();
        check(cc::decode(bytes_of(out), b.count, fused_.data() + b.offset), rank_, b, "own pull");
        record(Phase::kDecompress, b.tensor, begin, out.size);
      }
      send(next_, pull_tag(rank_), out, b);
    }
  }

  // Every other segment in ring order: decode each block in place and forward the same bytes.
  void receive_and_forward() {
    for (int d = 1; d < size_; ++d) {
      const int j = ring_segment(d);
      const auto blocks = plan_.segment(j);
      auto& in = pulled_in_[static_cast<size_t>(j)];
      for (size_t k = 0; k < blocks.size(); ++k) {
        Message& m = in[k];
        const Block& b = blocks[k];
        m.size = transfers_.wait(m.id);
        const int64_t begin = start();
        check(cc::decode(bytes_of(m), b.count, fused_.data() + b.offset), prev_, b, "pull");
        record(Phase::kDecompress, b.tensor, begin, m.size);
        if (next_ != j) send(next_, pull_tag(j), m, b);
      }
    }
  }

  std::span<float> fused_;
  std::span<const TensorSlice> tensors_;
  std::vector<float*> errors_;
  const PushPullOptions& options_;
  int rank_;
  int size_;
  int next_;
  int prev_;
  BlockPlan plan_;
  detail::Transfers transfers_;
  std::vector<std::vector<Message>> scattered_in_;  // [segment][block]: partial sums from prev
  std::vector<std::vector<Message>> pulled_in_;     // [segment][block]: final blocks from prev
  std::deque<Message> outgoing_;                    // stable addresses while sends are in flight
};

}  // namespace

void ring_allreduce_sum(transport::Context& context, std::span<float> fused,
                        std::span<const TensorSlice> tensors, ErrorFeedbackStore& errors,
                        const PushPullOptions& options) {
  if (const cc::Status status = cc::check_encode_options(encode_options(options)); !status.ok()) {
    throw std::invalid_argument("ring_allreduce: " + status.message());
  }
  check_samples(options.feedback, tensors.size(), "ring_allreduce");
  // Validates the layout (and sizes every error buffer) even where nothing is sent.
  BlockPlan plan = plan_blocks(fused.size(), tensors, context.size(), options.chunk_bytes);
  std::vector<float*> buffers(tensors.size(), nullptr);
  if (options.compress) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      buffers[i] = errors.get(tensors[i].name, tensors[i].count).data();
    }
  }
  if (context.size() == 1) return;
  RingAllreduce(context, fused, tensors, std::move(plan), std::move(buffers), options).run();
}

}  // namespace threelc::engine
