// The Coordinator's two guards against a job that hangs (docs/ARCHITECTURE.md, "Negotiation").
// The stall timeout (THREELC_STALL_TIMEOUT) fails a tensor that some ranks submitted and others
// have not since its first submission, naming the missing ranks and what they have pending
// instead. The deadlock timeout (THREELC_DEADLOCK_TIMEOUT) fails every pending tensor when every
// rank that has not joined reports a thread blocked waiting for its operations, some tensors are
// pending and nothing has progressed (nothing ran, failed, completed or was submitted) for that
// long; the message names what each rank waits for. Both fail with THREELC_EMISMATCH on every
// rank that submitted the tensor, and the tensors are forgotten. Zero disables either.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "negotiation/coordinator_messages.h"
#include "negotiation/messages.h"
#include "negotiation/pending_tensors.h"

namespace threelc::engine {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  Watchdog(int size, Clock::duration stall_timeout, Clock::duration deadlock_timeout);

  // What `rank` reported this cycle: whether it submitted anything, whether one of its threads
  // is blocked waiting for an operation.
  void heard(int rank, bool submitted, bool blocked);

  // The error responses failing every tensor that has waited on missing ranks for the stall
  // timeout (oldest first); they are forgotten.
  std::vector<Response> time_out(PendingTensors& pending, Clock::time_point now);
  // This cycle's deadlock check (`progressed`: something ran, failed or completed this cycle;
  // `stopping`: a rank has asked to shut down): the error responses failing every pending
  // tensor (oldest first) once the deadlock timeout has passed; they are forgotten.
  std::vector<Response> break_deadlock(PendingTensors& pending, Clock::time_point now,
                                       bool progressed, bool stopping);

 private:
  // A tensor that failed by the stall timeout, remembered for a while per rank that had
  // submitted it, so that the message about its counterpart can still name it.
  struct TimedOut {
    std::string name;  // as messages quote it
    Clock::time_point when;
  };

  void remember_timed_out(const OpKey& key, const PendingTensor& tensor, Clock::time_point now);
  MissingRankHint hint(int rank, const OpKey& key, const PendingTensors& pending,
                       const std::vector<OpKey>& by_order, Clock::time_point now) const;
  // Whether the ranks have been stuck for the deadlock timeout; resets this cycle's reports.
  bool deadlocked(const PendingTensors& pending, Clock::time_point now, bool progressed,
                  bool stopping);
  RankWait wait_of(size_t rank, const PendingTensors& pending,
                   const std::vector<OpKey>& by_order) const;

  Clock::duration stall_timeout_;
  Clock::duration deadlock_timeout_;
  std::vector<std::deque<TimedOut>> timed_out_;   // by rank: the last few of its tensors
  std::vector<char> blocked_;                     // by rank: blocked this cycle
  bool submitted_ = false;                        // something was submitted this cycle
  std::optional<Clock::time_point> stuck_since_;  // the first cycle of an ongoing deadlock
};

}  // namespace threelc::engine
