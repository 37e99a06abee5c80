// UcxWorker: one ucp context and one ucp worker per rank (RAII), and the progress thread, the
// only thread that calls into them. Other threads hand it work with post() / run().
//
// Why funnel rather than UCS_THREAD_MODE_MULTI: the worker is then single-threaded, so UCX
// takes no locks and every callback (completions, endpoint errors) runs on the thread that
// owns the pairs' bookkeeping, which needs no locks either; a post costs a queue push and one
// ucp_worker_signal() (an eventfd write), which UCX documents as safe from any thread.
//
// The progress thread does not spin while idle: it calls ucp_worker_progress() until nothing
// is left, arms the worker (ucp_worker_arm) and sleeps in poll() on ucp_worker_get_efd(), which
// a transport event or ucp_worker_signal() (a post, stop()) wakes. It also wakes every
// kIdleWake to let UCX run its timers (keepalive, which detects dead peers on transports that
// do not report them).
//
// While a send is in flight it does not sleep that way: a sender whose shared-memory FIFO is
// full gets no event when the peer drains it, only the next ucp_worker_progress() sees the
// room. So it yields the CPU between progress calls (the peer's progress thread may need this
// very core) for up to kSendSpin after the last progress, then polls every kSendWake until the
// send completes. Without this, two ranks sharing one core moved 0.1 GB/s (measured).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace threelc::transport::detail {

struct UcxWorkerOptions {
  std::string prefix;  // starts every error message ("threelc rank 3: ")
  int expected_peers = 0;
  // THREELC_IFACE as an interface name, or empty: UCX's network devices are then that
  // interface and every RDMA port of the host (so InfiniBand and RoCE stay in use), unless the
  // user set UCX_NET_DEVICES.
  std::string interface;
};

class UcxWorker {
 public:
  // Creates the context (tag matching and wake-up, UCX_* variables read from the environment),
  // the worker, its address, and starts the progress thread. Throws Error.
  explicit UcxWorker(const UcxWorkerOptions& options);
  // Stops the progress thread and destroys the worker and the context. Whatever still uses the
  // worker (endpoints, requests) must have been closed on the progress thread before.
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h handle() const { return worker_; }
  // This worker's address, for the peers' ucp_ep_create (exchanged over control).
  const std::vector<std::byte>& address() const { return address_; }

  // Runs `task` on the progress thread, after the tasks posted before it. Thread-safe.
  void post(std::function<void()> task);
  // Runs `task` on the progress thread and waits for it; false when it did not finish within
  // `limit` (it may still run later: capture nothing that dies first).
  bool run(const std::function<void()>& task, std::chrono::milliseconds limit);
  // Joins the progress thread (idempotent). Posts after it are dropped.
  void stop();

  // Sends posted and not yet complete (progress thread only; UcxPair counts them).
  void send_started() { ++sends_in_flight_; }
  void send_ended() { --sends_in_flight_; }

  static constexpr std::chrono::milliseconds kIdleWake{250};
  static constexpr std::chrono::microseconds kSendSpin{2000};
  static constexpr std::chrono::milliseconds kSendWake{1};

 private:
  void loop();
  // Runs the queued tasks; returns whether there were any.
  bool run_tasks();
  std::string fail_text(const char* what, ucs_status_t status) const;

  const std::string prefix_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  int sends_in_flight_ = 0;  // progress thread only
  std::vector<std::byte> address_;

  std::mutex mutex_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

// "Connection reset by remote peer" and the like: ucs_status_string() with its code.
std::string ucx_status_text(ucs_status_t status);

}  // namespace threelc::transport::detail
