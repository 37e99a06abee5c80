#include "negotiation/coordinator_messages.h"

#include <algorithm>
#include <span>

#include "negotiation/process_sets.h"
#include "observe/stall_inspector.h"

namespace threelc::engine {
namespace {

// A verb in the present tense, agreeing with the ranks it is said of.
struct Verb {
  const char* one;
  const char* many;
};
constexpr Verb kHave{"has", "have"};
constexpr Verb kWait{"waits", "wait"};

// "rank 2 has", "ranks 0-1 have"
std::string ranks_with(std::span<const int> ranks, const Verb& verb) {
  return ranks_text(ranks) + " " + (ranks.size() == 1 ? verb.one : verb.many);
}

std::string rank_text(int rank) { return "rank " + std::to_string(rank); }

// 'a', 'b' and 'c' / 'a', 'b', 'c' and 2 more (names already quoted)
std::string names_text(const std::vector<std::string>& names, size_t more) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() && more == 0 ? " and " : ", ";
    out += names[i];
  }
  if (more > 0) out += " and " + std::to_string(more) + " more";
  return out;
}

std::string refused(int rank, const OpRequest& request, const std::string& reason) {
  return what(request) + " on " + rank_text(rank) + ": " + reason;
}

// "rank 1 has 'b' pending", "rank 0 had 'a' pending until it timed out"
std::string missing_rank_hint(const MissingRankHint& hint) {
  const std::string who = rank_text(hint.rank);
  const std::vector<std::string>& pending = hint.pending.names;
  const size_t room = kHintNames - std::min(pending.size(), kHintNames);
  const std::vector<std::string> failed(
      hint.timed_out.begin(), hint.timed_out.begin() + std::min(room, hint.timed_out.size()));
  if (pending.empty() && failed.empty()) return who + " has nothing pending";
  std::string text;
  if (!pending.empty()) text = who + " has " + names_text(pending, hint.pending.more) + " pending";
  if (!failed.empty()) {
    text += pending.empty() ? who + " had " : " and had ";
    text += names_text(failed, 0) + " pending until " + (failed.size() == 1 ? "it" : "they") +
            " timed out";
  }
  return text;
}

// What ranks wait for, before the ranks are named: "has joined", "waits for barrier (...)".
struct Waiting {
  const Verb* verb;
  std::string object;
  bool operator==(const Waiting& other) const {
    return verb == other.verb && object == other.object;
  }
};

Waiting waiting(const RankWait& wait) {
  if (wait.joined) return {&kHave, "joined"};
  if (wait.operations.names.empty()) return {&kHave, "nothing pending"};
  return {&kWait, "for " + names_text(wait.operations.names, wait.operations.more)};
}

// Ranks that wait for the same, in the order of their lowest rank.
std::vector<std::pair<Waiting, std::vector<int>>> group_ranks(
    const std::vector<RankWait>& by_rank) {
  std::vector<std::pair<Waiting, std::vector<int>>> groups;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    Waiting w = waiting(by_rank[r]);
    const auto same = std::find_if(groups.begin(), groups.end(),
                                   [&](const auto& group) { return group.first == w; });
    if (same != groups.end()) {
      same->second.push_back(static_cast<int>(r));
    } else {
      groups.emplace_back(std::move(w), std::vector<int>{static_cast<int>(r)});
    }
  }
  return groups;
}

}  // namespace

std::string what(const OpRequest& request) {
  if (negotiated_globally(request.kind) || request.kind == OpKind::kBarrier) {
    return op_kind_name(request.kind);
  }
  return std::string(op_kind_name(request.kind)) + " of tensor " + quoted(key_of(request));
}

std::string submitted_twice_message(int rank, const OpRequest& request) {
  const std::string submission =
      request.kind == OpKind::kJoin ? "join" : "tensor " + quoted(key_of(request));
  return rank_text(rank) + " submitted " + submission + " twice";
}

std::string not_global_message(int rank, const OpRequest& request) {
  return refused(
      rank, request,
      "runs among every rank, not in process set " + std::to_string(request.process_set));
}

std::string unknown_set_message(int rank, const OpRequest& request, const std::string& unknown) {
  return refused(rank, request, unknown);
}

std::string not_member_message(int rank, const OpRequest& request,
                               const std::vector<int32_t>& members) {
  return refused(rank, request,
                 rank_text(rank) + " is not a member of process set " +
                     std::to_string(request.process_set) + " (ranks " + members_text(members) +
                     ")");
}

std::string mismatch_message(const OpKey& key, std::string mismatch) {
  if (key.process_set != kGlobalProcessSet) {
    mismatch += " (process set " + std::to_string(key.process_set) + ")";
  }
  return mismatch;
}

std::string joined_message(const OpRequest& request, const std::vector<int32_t>& joined) {
  return what(request) + " cannot run while " + ranks_with(joined, kHave) + " joined";
}

std::string process_set_change_message(OpKind kind, const std::string& reason) {
  return std::string(op_kind_name(kind)) + ": " + reason;
}

std::string set_exists_reason(const std::vector<int32_t>& members, int32_t existing) {
  return "a process set of ranks " + members_text(members) + " exists already: process set " +
         std::to_string(existing) + " has the same ranks";
}

std::string global_set_removal_reason() { return "the global process set 0 cannot be removed"; }

std::string removed_while_pending_message(int32_t set, const OpRequest& request,
                                          const std::vector<int>& submitted) {
  return "process set " + std::to_string(set) + " was removed while " + what(request) +
         " was pending (submitted by " + ranks_text(submitted) + ")";
}

std::string timeout_message(const OpKey& key, const Parties& parties,
                            MessageClock::duration stall_timeout,
                            const std::vector<MissingRankHint>& hints) {
  const auto& [submitted, joined, missing] = parties;
  std::string message = "tensor " + quoted(key) + " was submitted by " + ranks_text(submitted);
  if (!joined.empty()) message += " (" + ranks_with(joined, kHave) + " joined)";
  message += " but not by " + ranks_text(missing) + " within " + format_seconds(stall_timeout) +
             " (THREELC_STALL_TIMEOUT)";
  for (size_t i = 0; i < hints.size(); ++i) {
    message += (i == 0 ? "; " : ", ") + missing_rank_hint(hints[i]);
  }
  if (missing.size() > kHintRanks) {
    message += " (" + std::to_string(missing.size() - kHintRanks) + " more ranks missing)";
  }
  return message;
}

std::string waited_for(const OpRequest& request, const Parties& parties) {
  std::string text = what(request) + " (submitted by " + ranks_text(parties.submitted);
  if (!parties.joined.empty()) text += ", " + ranks_text(parties.joined) + " joined";
  if (!parties.missing.empty()) text += ", not by " + ranks_text(parties.missing);
  return text + ")";
}

std::string deadlock_message(MessageClock::duration deadlock_timeout,
                             const std::vector<RankWait>& by_rank) {
  const auto groups = group_ranks(by_rank);
  std::string message =
      "deadlock: every rank has been blocked waiting for operations that cannot run for " +
      format_seconds(deadlock_timeout) + " (THREELC_DEADLOCK_TIMEOUT): ";
  for (size_t i = 0; i < groups.size() && i < kHintRanks; ++i) {
    const auto& [waits, ranks] = groups[i];
    if (i > 0) message += "; ";
    message += ranks_with(ranks, *waits.verb) + " " + waits.object;
  }
  if (groups.size() > kHintRanks) {
    message += " (and " + std::to_string(groups.size() - kHintRanks) + " more groups of ranks)";
  }
  return message;
}

}  // namespace threelc::engine
