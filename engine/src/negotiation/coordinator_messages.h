// Every text the Coordinator writes: its refusals, its decisions' errors, the stall timeout's and
// the deadlock's messages. Each is built from the facts alone (no text is mended afterwards):
// a list of ranks is written by ranks_text ("rank 3", "ranks 0-2, 5") and its verb agrees with
// it; a process set's members are written by members_text ("[0, 2]"), as the C ABI writes them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "negotiation/pending_tensors.h"
#include "runtime/operation.h"

namespace threelc::engine {

using MessageClock = std::chrono::steady_clock;

// How many missing ranks (or groups of blocked ranks) a message describes, and how many names
// it lists for each.
inline constexpr size_t kHintRanks = 4;
inline constexpr size_t kHintNames = 3;

// Up to kHintNames names, the rest counted.
struct NameList {
  std::vector<std::string> names;
  size_t more = 0;
  // Lists the next name; `describe` is called only when the name is listed.
  template <typename Describe>
  void add(Describe describe) {
    if (names.size() < kHintNames) {
      names.push_back(describe());
    } else {
      ++more;
    }
  }
};

// "allreduce of tensor 'w' (process set 2)", "barrier", "add_process_set".
std::string what(const OpRequest& request);

std::string submitted_twice_message(int rank, const OpRequest& request);

// Refusals of `rank`'s submission, e.g. "barrier on rank 1: process set 1 was removed".
std::string not_global_message(int rank, const OpRequest& request);
std::string unknown_set_message(int rank, const OpRequest& request, const std::string& unknown);
std::string not_member_message(int rank, const OpRequest& request,
                               const std::vector<int32_t>& members);

// check_consistency()'s `mismatch`, naming the tensor's set when it is not the global one.
std::string mismatch_message(const OpKey& key, std::string mismatch);
// A broadcast, reducescatter or alltoall that cannot run while `joined` have joined.
std::string joined_message(const OpRequest& request, const std::vector<int32_t>& joined);

// "add_process_set: <reason>", "remove_process_set: <reason>".
std::string process_set_change_message(OpKind kind, const std::string& reason);
std::string set_exists_reason(const std::vector<int32_t>& members, int32_t existing);
std::string global_set_removal_reason();
std::string removed_while_pending_message(int32_t set, const OpRequest& request,
                                          const std::vector<int>& submitted);

// What a rank missing for a timed-out tensor has pending: its other pending tensors (oldest
// first) and those of its tensors that timed out recently (oldest first), quoted.
struct MissingRankHint {
  int rank = 0;
  NameList pending;
  std::vector<std::string> timed_out;
};
// `hints`: for the first kHintRanks of `parties.missing`.
std::string timeout_message(const OpKey& key, const Parties& parties,
                            MessageClock::duration stall_timeout,
                            const std::vector<MissingRankHint>& hints);

// What a blocked rank waits for: nothing once it has joined, else its pending operations
// (oldest first), each as waited_for() writes it.
struct RankWait {
  bool joined = false;
  NameList operations;
};
// "allreduce of tensor 'g' (submitted by rank 1, rank 2 joined, not by rank 0)".
std::string waited_for(const OpRequest& request, const Parties& parties);
// `by_rank[r]`: what rank r waits for; ranks that wait for the same are named together.
std::string deadlock_message(MessageClock::duration deadlock_timeout,
                             const std::vector<RankWait>& by_rank);

}  // namespace threelc::engine
