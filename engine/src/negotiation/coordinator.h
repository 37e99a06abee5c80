// Rank 0's side of negotiation: collects every rank's submissions cycle by cycle and decides
// what runs. A tensor runs once every rank has submitted it (or has joined), in the order in
// which its first submission reached the coordinator; a tensor submitted differently fails on
// every rank; ready allreduces are fused.
#pragma once

#include <chrono>
#include <cstdint>
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
    Clock::duration stall_warning = std::chrono::seconds(60);  // zero disables
  };
  explicit Coordinator(const Options& options);
  ~Coordinator();

  // What `rank` submitted this cycle (cache hits already resolved into requests). Ranks are
  // added in rank order each cycle.
  void add(int rank, std::vector<OpRequest> requests, bool shutdown, Clock::time_point now);
  // This cycle's responses for every rank.
  CycleResponse respond();
  // Warnings about tensors some ranks have waited on for longer than the stall time.
  std::vector<std::string> stall_warnings(Clock::time_point now);

 private:
  struct Pending {
    std::vector<std::optional<OpRequest>> by_rank;
    int submitted = 0;
    uint64_t order = 0;
  };
  Response decide(const std::string& name, Pending& pending) const;
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
};

// The name every rank's join travels under: empty, the one name no user tensor can have (an
// empty name is replaced by a generated one), so joins never collide with tensors.
inline constexpr const char* kJoinName = "";
// How stall warnings and messages call it.
inline constexpr const char* kJoinDisplayName = "(join)";

}  // namespace threelc::engine
