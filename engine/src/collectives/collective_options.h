// What every collective of engine/src/collectives takes and throws, and the bookkeeping of the
// transfers one call posts (shared by the implementations; not for the engine's callers).
//
// Every collective runs synchronously on the calling thread (the engine's background thread)
// over transport::Context. Errors: transport::Error passes through (it names the peer);
// CollectiveError for a message of the wrong length or a malformed block (it names the peer);
// std::invalid_argument for bad arguments. When a collective throws, every request it posted
// has completed or failed before it returns, so no buffer is freed under a transfer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "collectives/observer.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

class Workspace;

struct CollectiveOptions {
  // Messages carry at most this many bytes (of native elements; for element-typed collectives
  // rounded down to whole elements), so that transfers pipeline.
  size_t chunk_bytes = size_t{1} << 20;
  // First tag used on the data pairs; each collective documents the range it takes.
  uint32_t tag_base = 0x1000;
  CollectiveObserver* observer = nullptr;  // nullptr: nothing recorded
  // Where staging buffers come from; nullptr: allocated for the call. Only one collective may
  // use a workspace at a time.
  class Workspace* workspace = nullptr;
};

// A message that arrived with the wrong length or malformed (or a block that could not be
// encoded): names the peer (-1 for none).
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(int peer, const std::string& message)
      : std::runtime_error(message), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

namespace detail {

// The start of an event: the time when there is an observer, else 0 (no clock read).
inline int64_t event_start(const CollectiveObserver* observer) {
  return observer != nullptr ? steady_now_ns() : 0;
}

// Records an event that began at `begin_ns` and ends now.
inline void record_event(CollectiveObserver* observer, Phase phase, size_t tensor, int64_t begin_ns,
                         size_t bytes, int peer = -1) {
  if (observer == nullptr) return;
  observer->record(PhaseEvent{tensor, phase, begin_ns, steady_now_ns(), bytes, peer});
}

inline size_t chunk_count(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

// The chunk length of `options` in bytes, a whole number of `element_bytes` elements; throws
// std::invalid_argument when it holds none.
inline size_t chunk_length(const CollectiveOptions& options, size_t element_bytes,
                           const char* collective) {
  const size_t chunk = options.chunk_bytes / element_bytes * element_bytes;
  if (chunk == 0) {
    throw std::invalid_argument(std::string(collective) + ": chunk_bytes " +
                                std::to_string(options.chunk_bytes) + " holds no element of " +
                                std::to_string(element_bytes) + " bytes");
  }
  return chunk;
}

// Every send and receive one call of a collective posts: waits on them (checking lengths and
// recording events) and, after a failure, lets each one finish before the buffers go away.
class Transfers {
 public:
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
                 bool exact = true) {
    receives_.push_back(
        Posted{ctx_.pair(peer).recv(tag, into), peer, tag, into.size(), tensor, 0, exact, false});
    return receives_.size() - 1;
  }

  // Posts a send; `bytes` must stay unchanged until wait_sends() or drain().
  void send(int peer, uint32_t tag, std::span<const std::byte> bytes, size_t tensor) {
    const int64_t begin = event_start(observer_);
    sends_.push_back(Posted{ctx_.pair(peer).send(tag, bytes), peer, tag, bytes.size(), tensor,
                            begin, true, false});
  }

  // Waits for receive `id`; returns its length. Throws CollectiveError naming the peer when an
  // exact receive got fewer bytes (the transport fails a longer one with transport::Error).
  size_t wait(size_t id) {
    Posted& r = receives_[id];
    const int64_t begin = event_start(observer_);
    r.waited = true;
    const size_t got = r.request.wait();
    record_event(observer_, Phase::kReceive, r.tensor, begin, got, r.peer);
    if (r.exact && got != r.bytes) {
      throw CollectiveError(r.peer, who_ + ": message from rank " + std::to_string(r.peer) +
                                        " (tag " + std::to_string(r.tag) + ") has " +
                                        std::to_string(got) + " bytes, expected " +
                                        std::to_string(r.bytes));
    }
    return got;
  }

  void wait_sends() {
    for (Posted& s : sends_) {
      if (s.waited) continue;
      s.waited = true;
      s.request.wait();
      record_event(observer_, Phase::kSend, s.tensor, s.posted_ns, s.bytes, s.peer);
    }
  }

  // After a failure: every request not yet waited on completes or fails (errors swallowed).
  void drain() noexcept {
    for (auto* list : {&receives_, &sends_}) {
      for (Posted& p : *list) {
        if (p.waited) continue;
        p.waited = true;
        try {
          p.request.wait();
        } catch (...) {  // NOLINT(bugprone-empty-catch): the first failure is what matters
        }
      }
    }
  }

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

}  // namespace detail

}  // namespace threelc::engine
