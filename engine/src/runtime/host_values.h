// The ValueSpace of host tensors: the CPU codec, a fusion buffer in host memory, residuals in
// the ErrorFeedbackStore (which checkpoints save and load), and the engine's own reducescatter
// and allgather among the host's ranks for THREELC_HIERARCHICAL.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/block_codec.h"
#include "collectives/hierarchical.h"
#include "collectives/reduce_ops.h"
#include "error_feedback.h"
#include "runtime/value_space.h"

namespace threelc::engine {

class HostValues final : public ValueSpace {
 public:
  // What the executor keeps across collectives; `local` is null without THREELC_HIERARCHICAL.
  struct Parts {
    std::vector<std::byte>& fusion;
    ErrorFeedbackStore& residuals;
    HostLocalExchange* local = nullptr;
  };
  explicit HostValues(const Parts& parts) : parts_(parts) {}

  BlockCodec& codec() override { return codec_; }
  std::byte* fusion_buffer(size_t bytes) override;
  size_t padded(size_t count, size_t /*parts*/) const override { return count; }
  void convert(ElementType from, const void* src, ElementType to, void* dst, size_t count) override;
  void zero(float* dst, size_t count) override { std::memset(dst, 0, count * sizeof(float)); }
  void scale(ElementType type, void* values, size_t count, double factor) override {
    scale_values(type, values, count, factor);
  }
  void divide(ElementType type, void* values, size_t count, int divisor) override {
    divide_values(type, values, count, divisor);
  }
  float* residual(const std::string& name, size_t count) override {
    return parts_.residuals.get(name, count).data();
  }
  LocalExchange* local_exchange(CollectiveObserver* observer) override;
  void finish() override {}

 private:
  Parts parts_;
  HostBlockCodec codec_;
};

}  // namespace threelc::engine
