#include "error_feedback.h"

#include <stdexcept>

namespace threelc::engine {

std::span<float> ErrorFeedbackStore::get(const std::string& name, size_t count) {
  auto [it, inserted] = buffers_.try_emplace(name);
  if (inserted) {
    it->second.assign(count, 0.0f);
  } else if (it->second.size() != count) {
    throw std::invalid_argument("error feedback: tensor '" + name + "' has " +
                                std::to_string(count) + " elements, but its buffer was made for " +
                                std::to_string(it->second.size()));
  }
  return it->second;
}

}  // namespace threelc::engine
