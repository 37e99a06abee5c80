// Rank 0's record of who submitted what (the Coordinator's, docs/ARCHITECTURE.md,
// "Negotiation"): the pending tensors by (process set, name) in the order their first
// submission arrived, the pending join, and which of the ranks a tensor needs have submitted it,
// have joined or are missing. The stall inspector (THREELC_STALL_CHECK_TIME) hears of every
// submission recorded and every tensor forgotten here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "negotiation/process_sets.h"
#include "runtime/operation.h"

namespace threelc::engine {

class StallInspector;

// The name every rank's join travels under: empty, the one name no user tensor can have (an
// empty name is replaced by a generated one), so joins never collide with tensors.
inline constexpr const char* kJoinName = "";
// How stall warnings and messages call it.
inline constexpr const char* kJoinDisplayName = "(join)";

struct PendingTensor {
  using Clock = std::chrono::steady_clock;
  std::vector<std::optional<OpRequest>> by_rank;
  int submitted = 0;
  uint64_t order = 0;       // arrival order among the pending tensors
  Clock::time_point first;  // when its first submission arrived

  // The request of the lowest rank that submitted it (every pending tensor has one).
  const OpRequest& first_request() const;
};

// Which of the ranks a pending tensor needs have submitted it, have joined (standing in for
// it), or are missing; ascending.
struct Parties {
  std::vector<int> submitted;
  std::vector<int> joined;
  std::vector<int> missing;
};

class PendingTensors {
 public:
  using Clock = PendingTensor::Clock;
  using Pick = std::function<bool(const OpKey&, const PendingTensor&)>;

  // `sets` (the coordinator's table) must outlive this record.
  PendingTensors(const ProcessSetTable& sets, Clock::duration stall_warning);
  ~PendingTensors();

  // Records `rank`'s submission (a join or a tensor). Throws NegotiationError when the rank
  // has it pending already.
  void add(int rank, OpRequest request, Clock::time_point now);

  bool empty() const { return tensors_.empty(); }
  const PendingTensor& at(const OpKey& key) const { return tensors_.at(key); }
  // The pending tensors that `pick` selects (all without one), oldest first.
  std::vector<OpKey> oldest_first(const Pick& pick = {}) const;
  // Removes the tensor and returns it; nullopt when it is not pending.
  std::optional<PendingTensor> take(const OpKey& key);
  void forget(const OpKey& key);

  // Whether every rank it needs has submitted `tensor` or stands in for it by joining.
  bool ready(const OpKey& key, const PendingTensor& tensor) const;
  Parties parties(const OpKey& key, const PendingTensor& tensor) const;

  bool has_joined(size_t rank) const;
  std::vector<int32_t> joined_ranks() const;
  bool everyone_joined() const;
  // The pending join (valid while any rank has joined) and the rank that joined last.
  const OpRequest& join_request() const { return join_.first_request(); }
  int last_joined() const { return last_joined_; }
  void forget_join();

  // Warnings about tensors some ranks have waited on for longer than the stall time.
  std::vector<std::string> stall_warnings(Clock::time_point now);

 private:
  // The ranks that must submit a tensor of `key` (a process set's members; add and remove:
  // every rank).
  std::vector<int32_t> expected_ranks(const OpKey& key, OpKind kind) const;
  // Whether a joined rank stands in for `key`'s tensor: in the global set only, and never
  // for an add or a removal of a set (which every rank must execute having asked for it).
  static bool joins_stand_in(const OpKey& key, OpKind kind);
  PendingTensor& slot_for(const OpRequest& request, Clock::time_point now);
  void tell_stall_inspector(int rank, const OpRequest& request, Clock::time_point now);

  const ProcessSetTable& sets_;
  // By (process set, name); joins are kept apart.
  std::unordered_map<OpKey, PendingTensor, OpKeyHash> tensors_;
  PendingTensor join_;
  uint64_t next_order_ = 0;
  int last_joined_ = -1;
  std::unique_ptr<StallInspector> stalls_;
};

}  // namespace threelc::engine
