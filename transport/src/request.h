// The shared state of one send or receive: completed on the context's I/O thread, waited on by
// the caller's thread. And what a wait that runs long does before it blames its peer: it asks
// the peer what the peer itself waits for (docs/RELIABILITY.md, "Whom a timeout blames").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "frame.h"

namespace threelc::transport::detail {

// How long a rank waits for a peer's answer; also how much earlier than THREELC_TIMEOUT a
// wait starts asking, so that a stalled peer is named within THREELC_TIMEOUT: a quarter of it,
// at most 3 s.
inline std::chrono::milliseconds answer_wait(std::chrono::milliseconds timeout) {
  return std::min(std::chrono::milliseconds(3000), timeout / 4);
}

// The waits this rank's threads are blocked in, so that the I/O threads can answer a peer's
// question without them. One per rank, shared by every channel (TCP and UCX alike).
class WaitRegistry {
 public:
  using Clock = std::chrono::steady_clock;
  void begin(const void* wait, int peer) {
    std::lock_guard lock(mutex_);
    waits_.push_back(Entry{wait, peer, Clock::now()});
  }
  void end(const void* wait) {
    std::lock_guard lock(mutex_);
    std::erase_if(waits_, [wait](const Entry& e) { return e.wait == wait; });
  }
  WaitAnswer longest() const {
    std::lock_guard lock(mutex_);
    if (waits_.empty()) return {};
    const Entry* oldest = &waits_.front();
    for (const Entry& e : waits_) {
      if (e.since < oldest->since) oldest = &e;
    }
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - oldest->since);
    return WaitAnswer{oldest->peer, static_cast<uint32_t>(std::max<int64_t>(waited.count(), 0))};
  }

 private:
  struct Entry {
    const void* wait;
    int peer;
    Clock::time_point since;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> waits_;
};

struct RequestState {
  RequestState(int peer_rank, std::string description, std::chrono::milliseconds wait_timeout)
      : peer(peer_rank), what(std::move(description)), timeout(wait_timeout) {}

  void complete(size_t n) {
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      bytes = n;
    }
    cv.notify_all();
  }
  void fail(const std::string& message) {
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      error = message;
    }
    cv.notify_all();
  }

  const int peer;
  const std::string what;  // "receive of tag 3 from rank 2"
  const std::chrono::milliseconds timeout;
  // Called (from the waiting thread) when wait() gives up: fails the connection, which fails
  // this request and so releases the caller's buffer.
  std::function<void(const std::string&)> on_timeout;
  // Asks the peer what it waits for and waits up to the given time for its answer; nullopt
  // when none came (the peer does not read: stalled, or unreachable). Unset: wait() blames the
  // peer at `timeout` without asking.
  std::function<std::optional<WaitAnswer>(std::chrono::milliseconds)> ask;
  std::shared_ptr<WaitRegistry> waits;  // this rank's, where wait() registers; may be null
  int self = -1;                        // this rank

  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  size_t bytes = 0;
  std::string error;
};

// The answer to one question a pair asked its peer, filled in by the pair's I/O thread.
struct PendingAnswer {
  void set(std::optional<WaitAnswer> value) {
    {
      std::lock_guard lock(mutex);
      if (done) return;
      done = true;
      answer = value;
    }
    cv.notify_all();
  }
  std::optional<WaitAnswer> wait_for(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    cv.wait_for(lock, limit, [this] { return done; });
    return answer;
  }

  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::optional<WaitAnswer> answer;
};

// The wait queries a pair sent that its peer has not answered yet, oldest first (the pair's I/O
// thread only).
class AskedQueries {
 public:
  void add(std::shared_ptr<PendingAnswer> pending) { pending_.push_back(std::move(pending)); }
  // Answers come in the order of the queries; one nobody asked is dropped.
  void answer(const WaitAnswer& value) {
    if (pending_.empty()) return;
    pending_.front()->set(value);
    pending_.pop_front();
  }
  // The pair failed: no query gets its answer.
  void fail_all() {
    for (auto& pending : pending_) pending->set(std::nullopt);
    pending_.clear();
  }

 private:
  std::deque<std::shared_ptr<PendingAnswer>> pending_;
};

}  // namespace threelc::transport::detail
