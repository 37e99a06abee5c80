#include "error_feedback.h"

namespace threelc::engine {

std::span<float> ErrorFeedbackStore::get(const std::string& name, size_t count) {
  auto [it, inserted] = buffers_.try_emplace(name);
  if (inserted || it->second.size() != count) it->second.assign(count, 0.0f);
  return it->second;
}

}  // namespace threelc::engine
