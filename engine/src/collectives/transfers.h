// The sends and receives one call of a collective has in flight (every collective of this folder
// posts through one): posting with a tag, waiting with the transport's timeout and an error that
// names the peer, send and receive events, and the drain after a failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives/observer.h"
#include "threelc/transport/transport.h"

namespace threelc::engine::detail {

// Every send and receive one call of a collective posts: waits on them (checking lengths and
// recording events) and, after a failure, lets each one finish before the buffers go away.
class Transfers {
 public:
  // `who` opens the messages of the errors it throws ("push_pull rank 3").
  Transfers(transport::Context& context, CollectiveObserver* observer, std::string who)
      : ctx_(context), observer_(observer), who_(std::move(who)) {}

  // Runs `body` and then waits for every send; on any exception drains first, then rethrows.
  template <typename Body>
  void run(Body&& body) {
    try {
      std::forward<Body>(body)();
      wait_sends();
    } catch (...) {
      drain();
      throw;
    }
  }

  // Posts a receive from `peer` into `into`; returns the id to wait() on. With `exact` the
  // message must fill `into`; without, it may be shorter (a compressed block checked later).
  size_t receive(int peer, uint32_t tag, std::span<std::byte> into, size_t tensor,
                 bool exact = true);

  // Posts a send; `bytes` must stay unchanged until wait_sends() or drain().
  void send(int peer, uint32_t tag, std::span<const std::byte> bytes, size_t tensor);

  // Waits for receive `id`; returns its length. Throws CollectiveError naming the peer when an
  // exact receive got fewer bytes (the transport fails a longer one with transport::Error).
  size_t wait(size_t id);

  void wait_sends();

  // After a failure: every request not yet waited on completes or fails (errors swallowed).
  void drain() noexcept;

  CollectiveObserver* observer() const { return observer_; }
  const std::string& who() const { return who_; }

 private:
  struct Posted {
    transport::Request request;
    int peer = -1;
    uint32_t tag = 0;
    size_t bytes = 0;  // receive: capacity (expected length when exact); send: length
    size_t tensor = 0;
    int64_t posted_ns = 0;
    bool exact = true;
    bool waited = false;
  };

  transport::Context& ctx_;
  CollectiveObserver* observer_;
  std::string who_;
  std::vector<Posted> receives_;
  std::vector<Posted> sends_;
};

}  // namespace threelc::engine::detail
