// Error model of the compression layer: every fallible function returns a Status.
// No exceptions cross this layer's API; an error carries a message that names the
// field or tile that was wrong and the values seen.
#pragma once

#include <string>
#include <utility>

namespace threelc::compression {

class [[nodiscard]] Status {
 public:
  static Status success() { return Status(); }
  static Status failure(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  Status() = default;
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}

  bool failed_ = false;
  std::string message_;
};

}  // namespace threelc::compression
