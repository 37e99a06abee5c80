// Error-feedback memory of one rank: one fp32 buffer per tensor name, kept across steps and
// independent of how tensors are fused. It holds the push residuals where this rank does not
// own a position and the pull residual where it does (see shared/DESIGN.md).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace threelc::engine {

class ErrorFeedbackStore {
 public:
  // The buffer of `name`, zero-initialized with `count` elements on first use. A name reused
  // with another element count starts again from zeros: a residual of one shape means nothing
  // to a tensor of another (every rank sees the same counts, so every rank starts again).
  std::span<float> get(const std::string& name, size_t count);

  bool contains(const std::string& name) const { return buffers_.count(name) != 0; }
  size_t size() const { return buffers_.size(); }
  void clear() { buffers_.clear(); }

 private:
  std::unordered_map<std::string, std::vector<float>> buffers_;
};

}  // namespace threelc::engine
