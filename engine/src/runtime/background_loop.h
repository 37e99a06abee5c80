// The background thread's cycle (Horovod's RunLoopOnce): every cycle each rank sends the
// coordinator what was submitted since the last cycle, rank 0 decides what runs, and every rank
// executes the same responses in the same order, then completes their handles.
#pragma once

#include <chrono>

#include <atomic>
#include <optional>
#include <string>

#include "negotiation/coordinator.h"
#include "negotiation/process_sets.h"
#include "negotiation/response_cache.h"
#include "observe/log.h"
#include "observe/stats.h"
#include "observe/timeline.h"
#include "runtime/executor.h"
#include "runtime/handle_table.h"
#include "runtime/tensor_queue.h"
#include "runtime/traffic_counters.h"
#include "settings.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

struct LoopParts {
  transport::Context* context = nullptr;
  TensorQueue* queue = nullptr;
  HandleTable* handles = nullptr;
  const EngineSettings* settings = nullptr;
  const Logger* log = nullptr;
  Timeline* timeline = nullptr;  // nullptr: no timeline on this rank
  Stats* stats = nullptr;        // always set
  TrafficCounters* counters = nullptr;
  // This rank's table of process sets: the loop adds and removes sets as it executes their
  // responses; framework threads read it (submission checks, threelc_process_set_*).
  ProcessSetTable* process_sets = nullptr;
  std::chrono::milliseconds timeout{};     // THREELC_TIMEOUT (the transport's): NCCL's waits
  std::optional<HostGroups> hierarchical;  // THREELC_HIERARCHICAL in effect: the groups
};

// Why the loop ended; operations still pending were completed with this code and reason.
struct LoopStop {
  int code = 0;
  std::string reason;
};

class BackgroundLoop {
 public:
  // How often a rank with nothing in flight still joins a cycle (otherwise it waits for a
  // submission): rank 0 answers the other ranks and watches for stalls at least this often.
  static constexpr std::chrono::milliseconds kIdleCycle{100};

  explicit BackgroundLoop(const LoopParts& parts);
  // Runs cycles until a cycle's response says shut down (some rank asked: `shutdown_requested`
  // here, then TensorQueue::wake) or a fatal error (a failed peer, a malformed message). A
  // cycle runs every THREELC_CYCLE_TIME_MS while operations are in flight on this rank, every
  // kIdleCycle while none are.
  LoopStop run(const std::atomic<bool>& shutdown_requested);
  // Completes every operation still in flight with `code` and `reason` (after run, once no
  // more can be submitted).
  void fail_everything(int code, const std::string& reason);
  // The executor's error-feedback store (thread-safe for save/load: error_feedback.h).
  ErrorFeedbackStore& error_feedback() { return executor_.error_feedback(); }

 private:
  CycleResponse negotiate(bool shutdown);
  CycleResponse coordinate(const CycleRequest& own);
  std::vector<OpRequest> resolve(const CycleRequest& request) const;
  // Rank 0 after a fatal error: tells every worker still listening why, so that their
  // operations fail with the original cause rather than a closed connection.
  void abort_workers(const std::string& reason) noexcept;
  // After a fatal error: the first cause, told to every peer (abort_workers, then
  // Context::stop) before any operation fails with it. (A timeout names the rank that stalled,
  // not one that waited for it: Request::wait asks before it blames.) Once only: later calls
  // return it.
  std::string stop_transport(const std::exception& error);
  void execute(const Response& response, int64_t arrived_ns);
  // An add or remove response: this rank's table (and the executor) follow it.
  OpResult change_process_sets(const Response& response);
  // Logs the error-feedback monitor's messages and counts its alerts in the statistics.
  void report_feedback();

  LoopParts parts_;
  int rank_;
  int size_;
  ResponseCache cache_;
  std::optional<Coordinator> coordinator_;  // rank 0
  Executor executor_;
  std::optional<std::string> stop_cause_;  // set by stop_transport
};

}  // namespace threelc::engine
