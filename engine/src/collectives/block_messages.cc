#include "collectives/block_messages.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "collectives/collective_error.h"
#include "collectives/feedback_monitor.h"

namespace threelc::engine {

namespace cc = threelc::compression;

std::vector<float*> coding_residuals(const char* collective, std::span<float* const> residuals,
                                     size_t tensors, bool compress) {
  if (compress ? residuals.size() != tensors : !residuals.empty()) {
    throw std::invalid_argument(std::string(collective) + ": " + std::to_string(residuals.size()) +
                                " residual buffers for " + std::to_string(tensors) +
                                " tensors (one each when compressing, none otherwise)");
  }
  std::vector<float*> buffers(residuals.begin(), residuals.end());
  if (buffers.empty()) buffers.assign(tensors, nullptr);
  return buffers;
}

BlockMessages::BlockMessages(BlockCoding coding, detail::Transfers& transfers)
    : options_(*coding.options),
      tensors_(coding.tensors),
      residuals_(std::move(coding.residuals)),
      codec_(*coding.codec),
      workspace_(coding.workspace),
      transfers_(transfers),
      quantize_(encode_options(*coding.options)) {}

ScratchBuffer<uint8_t>& BlockMessages::buffer_for(const Block& b) {
  const size_t n = cc::max_block_bytes(b.count);
  ScratchBuffer<uint8_t>& buffer =
      workspace_ != nullptr ? workspace_->message(buffers_used_++, n) : own_buffers_.emplace_back();
  buffer.resize(n);
  return buffer;
}

IncomingBlock BlockMessages::receive(int peer, uint32_t tag, const Block& b) {
  ScratchBuffer<uint8_t>& buffer = buffer_for(b);
  return {&buffer, transfers_.receive(peer, tag, std::as_writable_bytes(std::span<uint8_t>(buffer)),
                                      b.tensor, /*exact=*/false)};
}

std::span<const uint8_t> BlockMessages::wait(const IncomingBlock& m) {
  return std::span<const uint8_t>(m.buffer->data(), transfers_.wait(m.id));
}

void BlockMessages::release(const IncomingBlock& m) {
  if (workspace_ == nullptr) m.buffer->release();
}

float* BlockMessages::residual_at(const Block& b) const {
  float* r = residuals_[b.tensor];
  return r == nullptr ? nullptr : r + (b.offset - tensors_[b.tensor].offset);
}

std::span<const uint8_t> BlockMessages::encode(const Block& b, std::span<const float> source) {
  ScratchBuffer<uint8_t>& out = buffer_for(b);
  float* residual = residual_at(b);
  const float* values = source.data() + b.offset;
  FeedbackSample* sample = sample_of(options_.feedback, options_.compress, b.tensor);
  // Magnitudes are measured only where the CPU can read the values and residuals.
  if (sample != nullptr && !codec_.host_values()) sample->measure = false;
  const float input_max = measure_input(sample, cc::Values{values, cc::DType::kFloat32, b.count});
  const int64_t begin = detail::event_start(options_.observer);
  cc::EncodedBlock result;
  const cc::Status status = codec_.encode(values, b.count, residual,
                                          options_.compress ? &quantize_ : nullptr, out, &result);
  if (!status.ok()) {
    throw CollectiveError(-1, transfers_.who() + ": encoding tensor '" + tensors_[b.tensor].name +
                                  "' failed: " + status.message());
  }
  detail::record_event(options_.observer, Phase::kCompress, b.tensor, begin, result.bytes);
  measure_encoded(sample, result, input_max, residual, b.count);
  return {out.data(), result.bytes};
}

void BlockMessages::decode(std::span<const uint8_t> block, const Block& b, bool add, float* dst,
                           int peer, const char* phase) {
  const int64_t begin = detail::event_start(options_.observer);
  const cc::Status status = codec_.decode(block, b.count, add, dst);
  if (!status.ok()) {
    throw CollectiveError(peer, transfers_.who() + ": malformed " + phase + " block from rank " +
                                    std::to_string(peer) + " (tensor '" + tensors_[b.tensor].name +
                                    "', " + std::to_string(b.count) + " values at offset " +
                                    std::to_string(b.offset) + "): " + status.message());
  }
  detail::record_event(options_.observer, Phase::kDecompress, b.tensor, begin, block.size());
}

}  // namespace threelc::engine
