// Rank 0's side of negotiation: collects every rank's submissions cycle by cycle and decides
// what runs. Tensors are told apart by (process set, name). A tensor of the global set (0) runs
// once every rank has submitted it (or has joined), a tensor of another set once every member
// of that set has, in the order in which its first submission reached the coordinator; a tensor
// submitted differently fails on every rank that sent it; ready allreduces of one set are
// fused. A tensor that some ranks submitted and others have not for the stall timeout fails too
// (THREELC_EMISMATCH on the ranks that submitted it), naming the missing ranks and what they
// have pending, so a name mismatch raises instead of hanging. A deadlock fails sooner: when
// every rank that has not joined reports a thread blocked waiting for its operations, some
// tensors are pending and none runs (nothing is ready, nothing new is submitted, nothing fails)
// for the deadlock timeout (THREELC_DEADLOCK_TIMEOUT), every pending tensor fails
// (THREELC_EMISMATCH) with one message naming what each rank waits for.
//
// Process sets: the coordinator keeps the table of sets. Adding and removing one are operations
// every rank of the job submits (in the same order on every rank); an add assigns the next id
// (never reused) unless a set with the same ranks exists, a remove fails the set's pending
// tensors first. A submission in an unknown or removed set, or by a rank outside the set, fails
// on that rank alone (THREELC_EINVAL).
//
// The policies live in files of their own, and this class runs them in their order each
// cycle: pending_tensors (who submitted what), readiness (what is ready and what it runs as),
// process_set_policy (the sets' rules), watchdog (the stall and deadlock timeouts) and
// coordinator_messages (every text they write).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "negotiation/messages.h"
#include "negotiation/pending_tensors.h"  // kJoinName, kJoinDisplayName
#include "negotiation/process_sets.h"
#include "negotiation/watchdog.h"
#include "settings.h"

namespace threelc::engine {

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;
  // from() takes them from the engine's settings; the rows hold the defaults.
  struct Options {
    int size = 1;
    size_t fusion_threshold = 0;         // THREELC_FUSION_THRESHOLD
    Clock::duration stall_warning{};     // THREELC_STALL_CHECK_TIME; zero disables
    Clock::duration stall_timeout{};     // THREELC_STALL_TIMEOUT; zero disables
    Clock::duration deadlock_timeout{};  // THREELC_DEADLOCK_TIMEOUT; zero disables

    // A job of `size` ranks under `settings`.
    static Options from(const EngineSettings& settings, int size);
  };
  explicit Coordinator(const Options& options);
  ~Coordinator();

  // What `rank` submitted this cycle (cache hits already resolved into requests), and whether
  // one of its threads is blocked waiting for an operation. Ranks are added in rank order each
  // cycle.
  void add(int rank, std::vector<OpRequest> requests, bool shutdown, Clock::time_point now,
           bool blocked = false);
  // This cycle's responses for every rank: the submissions refused for their process set, the
  // ready tensors (fused; a removed set's pending tensors fail just before its removal), then
  // an error response for every tensor that has waited on missing ranks for the stall timeout
  // since its first submission (oldest first; the coordinator forgets it), then a completed
  // join, then an error response for every pending tensor once the ranks have been deadlocked
  // for the deadlock timeout (oldest first; forgotten too).
  CycleResponse respond(Clock::time_point now);
  // Warnings about tensors some ranks have waited on for longer than the stall time.
  std::vector<std::string> stall_warnings(Clock::time_point now);
  // The process sets accepted so far.
  const ProcessSetTable& process_sets() const { return sets_; }

 private:
  // A ready tensor's responses, appended to `out`.
  void decide(const OpKey& key, std::vector<Response>& out);

  Options options_;
  ProcessSetTable sets_;
  PendingTensors pending_;         // refers to sets_
  std::vector<Response> refused_;  // this cycle's refusals (refusal())
  Watchdog watchdog_;
  int shutdown_rank_ = -1;
};

}  // namespace threelc::engine
