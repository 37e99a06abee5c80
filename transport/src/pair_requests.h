// PairRequests<P>: what TcpPair and UcxPair (P) do alike for their callers' requests, as a base
// of both: who the pair is (this rank, the peer, the peer's name in messages), its links to its
// context, the request states a caller's wait works with (a wait that gives up closes the pair,
// a long one asks the peer), and the texts of the requests' descriptions and errors.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "rank_prefix.h"
#include "request.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// What a pair shares with its context.
struct PairLinks {
  // Called on the pair's I/O thread (UCX: progress thread) when the peer's stop notice arrives:
  // (peer, its reason).
  using StopHandler = std::function<void(int, const std::string&)>;
  StopHandler on_stop;
  std::shared_ptr<WaitRegistry> waits;  // this rank's waits: what the peer's queries get
};

// P derives from std::enable_shared_from_this<P> and has the thread-safe
// close_after_timeout(message) and ask(wait). Those two stay in each pair: each posts to the
// pair's own thread (the Asio I/O thread, the UCX progress thread) and sends its own way.
template <class P>
class PairRequests {
 public:
  using StopHandler = PairLinks::StopHandler;
  using Links = PairLinks;

 protected:
  PairRequests(int self, int peer, std::string name, const Options& options, Links links)
      : self_(self),
        peer_(peer),
        max_bytes_(options.max_message_bytes),
        timeout_(options.timeout),
        name_(std::move(name)),
        links_(std::move(links)) {}

  std::string prefix() const { return rank_prefix(self_); }

  // The state of a caller's request: a wait on it that gives up closes the pair
  // (close_after_timeout), one that runs long asks the peer what it waits for (ask).
  std::shared_ptr<RequestState> make_state(std::string what) {
    auto state = std::make_shared<RequestState>(peer_, std::move(what), timeout_);
    std::weak_ptr<P> weak = static_cast<P*>(this)->weak_from_this();
    state->on_timeout = [weak](const std::string& message) {
      if (auto self = weak.lock()) self->close_after_timeout(message);
    };
    state->ask = [weak](std::chrono::milliseconds wait) -> std::optional<WaitAnswer> {
      if (auto self = weak.lock()) return self->ask(wait);
      return std::nullopt;
    };
    state->waits = links_.waits;
    state->self = self_;
    return state;
  }
  std::shared_ptr<RequestState> make_send_state(uint32_t tag, size_t bytes) {
    return make_state("send of " + std::to_string(bytes) + " bytes with tag " +
                      std::to_string(tag) + " to " + name_);
  }
  std::shared_ptr<RequestState> make_recv_state(uint32_t tag) {
    return make_state("receive with tag " + std::to_string(tag) + " from " + name_);
  }

  // Fails a send of `bytes` beyond THREELC_MAX_MESSAGE_BYTES; whether it did.
  bool fail_if_too_large(RequestState& state, size_t bytes) const {
    if (bytes <= max_bytes_) return false;
    state.fail(prefix() + state.what +
               " exceeds THREELC_MAX_MESSAGE_BYTES=" + std::to_string(max_bytes_));
    return true;
  }
  // Fails a receive of `capacity` bytes whose message of `length` bytes did not fit. UCX may
  // report no more than the capacity (it truncated the message): "more bytes than that".
  void fail_too_long(RequestState& state, uint64_t length, size_t capacity) const {
    const std::string sent =
        length > capacity ? std::to_string(length) + " bytes" : "more bytes than that";
    state.fail(prefix() + "message of " + sent + " from " + name_ +
               " does not fit the receive buffer of " + std::to_string(capacity) + " bytes (" +
               state.what + ")");
  }

  // What this rank waits for: the answer to the peer's wait query.
  WaitAnswer longest_wait() const { return links_.waits ? links_.waits->longest() : WaitAnswer{}; }

  const int self_;
  const int peer_;
  const uint64_t max_bytes_;
  const std::chrono::milliseconds timeout_;
  const std::string name_;
  const Links links_;
};

}  // namespace threelc::transport::detail
