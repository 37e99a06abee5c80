// One initialized engine: settings, the job's connections, the queue and handles shared with
// framework threads, and the background thread. The C ABI owns at most one (api/c_api.cc);
// nothing else is global.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "negotiation/process_sets.h"
#include "observe/log.h"
#include "observe/stats.h"
#include "observe/timeline.h"
#include "runtime/background_loop.h"
#include "runtime/handle_table.h"
#include "runtime/host_topology.h"
#include "runtime/operation.h"
#include "runtime/tensor_queue.h"
#include "runtime/traffic_counters.h"
#include "settings.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

class Engine {
 public:
  // Reads and checks every setting (EngineError THREELC_EINVAL naming a malformed variable),
  // joins the job (THREELC_EPEER naming the rank that failed) and starts the background thread.
  // `handles` outlives the engine, so that handles stay valid after shutdown.
  explicit Engine(HandleTable& handles);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Asks every rank to stop, waits for the background thread; pending operations fail with
  // THREELC_ESHUTDOWN. Prints statistics (THREELC_STATS=1) and closes the timeline.
  void shutdown();

  const Identity& identity() const { return identity_; }
  const EngineSettings& settings() const { return settings_; }
  HandleTable& handles() { return handles_; }
  const TrafficCounters& counters() const { return counters_; }
  // This rank's process sets, as far as it has executed their adds and removals.
  const ProcessSetTable& process_sets() const { return *process_sets_; }

  // Queues `operation` (its handle and submission time are filled in) and returns its handle.
  // Throws EngineError: THREELC_EDUPLICATE, or the code the engine stopped with.
  Handle submit(Operation operation);
  // What was submitted is all for now: the background thread negotiates it at once rather
  // than at its next cycle (threelc_flush).
  void flush() { queue_.flush(); }
  // This rank's error feedback as a checkpoint blob (threelc_feedback_save / _load): see
  // ErrorFeedbackStore::save and ::load, called here with this rank and job size. Safe from any
  // thread, also while the background thread runs collectives, and after the engine stopped.
  size_t save_feedback(std::string_view prefix, std::span<std::byte> out);
  void load_feedback(std::string_view prefix, std::span<const std::byte> blob);
  // "allreduce.noname.7": the n-th unnamed operation of a kind in a process set, the same on
  // every member that submits in the same order.
  std::string unnamed(OpKind kind, int32_t process_set);

 private:
  void run_loop();
  // The groups of THREELC_HIERARCHICAL when it is set and the hosts allow it (logs why not).
  std::optional<HostGroups> hierarchical_groups() const;

  EngineSettings settings_;
  transport::Options transport_options_;
  Logger log_;
  std::unique_ptr<transport::Context> context_;
  Identity identity_;
  std::unique_ptr<ProcessSetTable> process_sets_;
  std::unique_ptr<Timeline> timeline_;
  Stats stats_;
  TrafficCounters counters_;
  HandleTable& handles_;
  TensorQueue queue_;
  std::unique_ptr<BackgroundLoop> loop_;
  std::atomic<bool> shutdown_requested_{false};
  std::mutex stop_mutex_;  // orders submissions against the loop's end
  bool stopped_ = false;
  LoopStop stop_;
  std::map<std::pair<OpKind, int32_t>, uint64_t> unnamed_counts_;
  std::thread thread_;
  bool shut_down_ = false;
};

}  // namespace threelc::engine
