// The engine's error model: EngineError carries a THREELC_E* code (threelc/threelc.h) and a
// message; the C ABI turns it into a return code and threelc_last_error(). Failures of one
// operation complete its handle with a code and message instead.
#pragma once

#include <stdexcept>
#include <string>

namespace threelc::engine {

class EngineError : public std::runtime_error {
 public:
  EngineError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace threelc::engine
