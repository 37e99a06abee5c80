// The engine's error model: every error the engine throws is an EngineError, which carries a
// THREELC_E* code (threelc/error_codes.h, the one enum of codes), the rank it concerns (kNoPeer
// when none) and a message that says what went wrong and names that rank. The subclasses only
// say where it arose (a collective, negotiation, a feedback blob), each with its fixed code. The
// C ABI's guarded() turns an EngineError into its code and threelc_last_error(); a failure of
// one operation completes its handle with the code and message instead.
//
// Besides EngineError, two kinds of exception cross engine code: transport::Error (the
// transport layer's one error, naming the peer; the background loop maps it to THREELC_EPEER)
// and std::invalid_argument where an internal function is given arguments it cannot take (a
// caller's bug: the C ABI (api/requests.cc) and negotiation check users' arguments before a
// collective runs; an invalid_argument that escapes stops the engine with THREELC_EINTERNAL,
// as any other exception would). engine_settings_from() also throws
// std::invalid_argument for a malformed variable, its C++ callers' contract; Engine refuses it
// as EngineError(THREELC_EINVAL).
#pragma once

#include <stdexcept>
#include <string>

#include "threelc/error_codes.h"

namespace threelc::engine {

inline constexpr int kNoPeer = -1;

class EngineError : public std::runtime_error {
 public:
  EngineError(int code, const std::string& message, int peer = kNoPeer)
      : std::runtime_error(message), code_(code), peer_(peer) {}
  int code() const { return code_; }
  // The rank the error concerns, or kNoPeer.
  int peer() const { return peer_; }

 private:
  int code_;
  int peer_;
};

}  // namespace threelc::engine
