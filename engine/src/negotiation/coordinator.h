// Rank 0's side of negotiation: collects every rank's submissions cycle by cycle and decides
// what runs. A tensor runs once every rank has submitted it (or has joined), in the order in
// which its first submission reached the coordinator; a tensor submitted differently fails on
// every rank; ready allreduces are fused. A tensor that some ranks submitted and others have not
// for the stall timeout fails too (THREELC_EMISMATCH on the ranks that submitted it), naming the
// missing ranks and what they have pending, so a name mismatch raises instead of hanging.
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

namespace threelc::engine {

class StallInspector;

class Coordinator {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    int size = 1;
    size_t fusion_threshold = size_t{64} << 20;
    Clock::duration stall_warning = std::chrono::seconds(60);   // zero disables
    Clock::duration stall_timeout = std::chrono::seconds(600);  // zero disables
  };
  explicit Coordinator(const Options& options);
  ~Coordinator();

  // What `rank` submitted this cycle (cache hits already resolved into requests). Ranks are
  // added in rank order each cycle.
  void add(int rank, std::vector<OpRequest> requests, bool shutdown, Clock::time_point now);
  // This cycle's responses for every rank: the ready tensors (fused), then an error response for
  // every tensor that has waited on missing ranks for the stall timeout since its first
  // submission (oldest first; the coordinator forgets it), then a completed join.
  CycleResponse respond(Clock::time_point now);
  // Warnings about tensors some ranks have waited on for longer than the stall time.
  std::vector<std::string> stall_warnings(Clock::time_point now);

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
    std::string name;
    Clock::time_point when;
  };
  Response decide(const std::string& name, Pending& pending) const;
  std::vector<Response> time_out(Clock::time_point now);
  std::string timeout_message(const std::string& name, const Pending& pending,
                              const std::vector<std::pair<uint64_t, std::string>>& by_order,
                              Clock::time_point now) const;
  std::string pending_hint(int rank, const std::string& name,
                           const std::vector<std::pair<uint64_t, std::string>>& by_order,
                           Clock::time_point now) const;
  std::vector<int32_t> joined_ranks() const;

  Pending& join_pending();
  bool has_joined(size_t rank) const;

  Options options_;
  std::unordered_map<std::string, Pending> pending_;  // by name; joins are kept apart
  Pending join_;
  uint64_t next_order_ = 0;
  int last_joined_ = -1;
  int shutdown_rank_ = -1;
  std::unique_ptr<StallInspector> stalls_;
  std::vector<std::deque<TimedOut>> timed_out_;  // by rank: the last few of its tensors
};

// The name every rank's join travels under: empty, the one name no user tensor can have (an
// empty name is replaced by a generated one), so joins never collide with tensors.
inline constexpr const char* kJoinName = "";
// How stall warnings and messages call it.
inline constexpr const char* kJoinDisplayName = "(join)";

}  // namespace threelc::engine
