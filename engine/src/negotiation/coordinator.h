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
// for the deadlock timeout (THREELC_TIMEOUT), every pending tensor fails (THREELC_EMISMATCH)
// with one message naming what each rank waits for.
//
// Process sets: the coordinator keeps the table of sets. Adding and removing one are operations
// every rank of the job submits (in the same order on every rank); an add assigns the next id
// (never reused) unless a set with the same ranks exists, a remove fails the set's pending
// tensors first. A submission in an unknown or removed set, or by a rank outside the set, fails
// on that rank alone (THREELC_EINVAL).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "negotiation/messages.h"
#include "negotiation/process_sets.h"

namespace threelc::engine {

class StallInspector;

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    int size = 1;
    size_t fusion_threshold = size_t{64} << 20;
    Clock::duration stall_warning = std::chrono::seconds(60);     // zero disables
    Clock::duration stall_timeout = std::chrono::seconds(600);    // zero disables
    Clock::duration deadlock_timeout = std::chrono::seconds(30);  // zero disables
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
  struct Pending {
    std::vector<std::optional<OpRequest>> by_rank;
    int submitted = 0;
    uint64_t order = 0;
    Clock::time_point first;  // when its first submission arrived
  };
  // A tensor that failed by the stall timeout, remembered for a while per rank that had
  // submitted it, so that the message about its counterpart can still name it.
  struct TimedOut {
    std::string name;  // as messages quote it
    Clock::time_point when;
  };
  using ByOrder = std::vector<std::pair<uint64_t, OpKey>>;
  // Which of the ranks a pending tensor needs have submitted it, have joined (standing in for
  // it), or are missing.
  struct Parties {
    std::vector<int> submitted;
    std::vector<int> joined;
    std::vector<int> missing;
  };
  // The request of the lowest rank that submitted it (every pending tensor has one).
  static const OpRequest& first_request(const Pending& pending);
  // Why `rank` may not submit `request` (its process set is unknown or removed, or the rank
  // is not a member): the error response failing it on that rank; nullopt when it may.
  std::optional<Response> refusal(int rank, const OpRequest& request) const;
  // The ranks that must submit a tensor of `key` (a process set's members; add and remove:
  // every rank); nullopt when its set is gone.
  std::optional<std::vector<int32_t>> expected_ranks(const OpKey& key, OpKind kind) const;
  bool ready(const OpKey& key, const Pending& pending) const;
  Response decide(const OpKey& key, const Pending& pending);
  Response add_process_set(const OpRequest& request);
  // The removal's responses: an error for each of the set's pending tensors, then the removal.
  void remove_process_set(const OpKey& key, const Pending& pending, std::vector<Response>& out);
  Parties parties(const OpKey& key, const Pending& pending) const;
  std::vector<Response> time_out(Clock::time_point now);
  // This cycle's deadlock check (`progressed`: something ran, failed or completed this cycle):
  // the error responses failing every pending tensor once the deadlock timeout has passed.
  std::vector<Response> break_deadlock(Clock::time_point now, bool progressed);
  std::string deadlock_message(const ByOrder& by_order) const;
  ByOrder pending_by_order() const;
  std::string timeout_message(const OpKey& key, const Pending& pending, const ByOrder& by_order,
                              Clock::time_point now) const;
  std::string pending_hint(int rank, const OpKey& key, const ByOrder& by_order,
                           Clock::time_point now) const;
  std::vector<int32_t> joined_ranks() const;
  void forget(const OpKey& key);

  Pending& join_pending();
  bool has_joined(size_t rank) const;

  Options options_;
  // By (process set, name); joins are kept apart.
  std::unordered_map<OpKey, Pending, OpKeyHash> pending_;
  std::vector<Response> refused_;  // this cycle's refusals (refusal())
  ProcessSetTable sets_;
  Pending join_;
  uint64_t next_order_ = 0;
  int last_joined_ = -1;
  int shutdown_rank_ = -1;
  std::unique_ptr<StallInspector> stalls_;
  std::vector<std::deque<TimedOut>> timed_out_;   // by rank: the last few of its tensors
  std::vector<char> blocked_;                     // by rank: blocked this cycle
  bool submitted_ = false;                        // something was submitted this cycle
  std::optional<Clock::time_point> stuck_since_;  // the first cycle of an ongoing deadlock
};

// The name every rank's join travels under: empty, the one name no user tensor can have (an
// empty name is replaced by a generated one), so joins never collide with tensors.
inline constexpr const char* kJoinName = "";
// How stall warnings and messages call it.
inline constexpr const char* kJoinDisplayName = "(join)";

}  // namespace threelc::engine
