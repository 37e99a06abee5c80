// Negotiation messages over the transport's control channel: each message travels as an
// 8-byte length (tag kControlLengthTag) followed by its bytes (tag kControlBodyTag).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "threelc/transport/transport.h"

namespace threelc::engine {

inline constexpr uint32_t kControlLengthTag = 0x10;
inline constexpr uint32_t kControlBodyTag = 0x11;
// The longest negotiation message accepted (a cycle of many new requests stays far below).
inline constexpr size_t kMaxControlMessage = size_t{64} << 20;

// Sends and waits for the send to complete. Throws transport::Error.
void send_control(transport::Pair& pair, std::span<const std::byte> message);

// A receive of one message, posted now and finished by wait().
class ControlReceive {
 public:
  explicit ControlReceive(transport::Pair& pair);
  ControlReceive(const ControlReceive&) = delete;  // the posted receive points into this object
  ControlReceive& operator=(const ControlReceive&) = delete;
  // Throws transport::Error (naming the peer) on failure or timeout, NegotiationError (naming
  // the peer) for an oversized or short message.
  std::vector<std::byte> wait();

 private:
  transport::Pair* pair_;
  uint64_t length_ = 0;
  transport::Request length_request_;
};

}  // namespace threelc::engine
