#include "runtime/control_channel.h"

#include <string>

#include "negotiation/wire.h"

namespace threelc::engine {

void send_control(transport::Pair& pair, std::span<const std::byte> message) {
  const uint64_t length = message.size();
  auto a = pair.send(kControlLengthTag, std::as_bytes(std::span(&length, 1)));
  auto b = pair.send(kControlBodyTag, message);
  a.wait();
  b.wait();
}

ControlReceive::ControlReceive(transport::Pair& pair)
    : pair_(&pair),
      length_request_(
          pair.recv(kControlLengthTag, std::as_writable_bytes(std::span(&length_, 1)))) {}

std::vector<std::byte> ControlReceive::wait() {
  if (length_request_.wait() != sizeof length_ || length_ > kMaxControlMessage) {
    throw NegotiationError("negotiation message from rank " + std::to_string(pair_->peer()) +
                               " announces " + std::to_string(length_) + " bytes (limit " +
                               std::to_string(kMaxControlMessage) + ")",
                           pair_->peer());
  }
  std::vector<std::byte> body(length_);
  const size_t got = pair_->recv(kControlBodyTag, body).wait();
  if (got != length_) {
    throw NegotiationError("negotiation message from rank " + std::to_string(pair_->peer()) +
                               " has " + std::to_string(got) + " bytes, announced " +
                               std::to_string(length_),
                           pair_->peer());
  }
  return body;
}

}  // namespace threelc::engine
