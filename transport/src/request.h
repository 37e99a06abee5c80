// The shared state of one send or receive: completed on the context's I/O thread, waited on by
// the caller's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace threelc::transport::detail {

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
  // Called (from the waiting thread) when wait() times out: fails the connection, which fails
  // this request and so releases the caller's buffer.
  std::function<void(const std::string&)> on_timeout;

  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  size_t bytes = 0;
  std::string error;
};

}  // namespace threelc::transport::detail
