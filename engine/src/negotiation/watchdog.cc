#include "negotiation/watchdog.h"

#include <algorithm>
#include <utility>

#include "threelc/threelc.h"

namespace threelc::engine {

Watchdog::Watchdog(int size, Clock::duration stall_timeout, Clock::duration deadlock_timeout)
    : stall_timeout_(stall_timeout),
      deadlock_timeout_(deadlock_timeout),
      timed_out_(static_cast<size_t>(std::max(size, 1))),
      blocked_(static_cast<size_t>(std::max(size, 1)), 0) {}

void Watchdog::heard(int rank, bool submitted, bool blocked) {
  blocked_[static_cast<size_t>(rank)] = blocked ? 1 : 0;
  if (submitted) submitted_ = true;
}

std::vector<Response> Watchdog::time_out(PendingTensors& pending, Clock::time_point now) {
  if (stall_timeout_ <= Clock::duration::zero()) return {};
  const std::vector<OpKey> due =
      pending.oldest_first([&](const OpKey&, const PendingTensor& tensor) {
        return now - tensor.first >= stall_timeout_;
      });
  if (due.empty()) return {};
  // Every pending tensor in arrival order (the due ones too): the hints of the messages.
  const std::vector<OpKey> by_order = pending.oldest_first();
  std::vector<Response> failed;
  for (const OpKey& key : due) {
    const PendingTensor& tensor = pending.at(key);
    const Parties parties = pending.parties(key, tensor);
    std::vector<MissingRankHint> hints;
    for (size_t i = 0; i < parties.missing.size() && i < kHintRanks; ++i) {
      hints.push_back(hint(parties.missing[i], key, pending, by_order, now));
    }
    failed.push_back(error_response(tensor.first_request(), THREELC_EMISMATCH,
                                    timeout_message(key, parties, stall_timeout_, hints)));
  }
  for (const OpKey& key : due) {
    remember_timed_out(key, pending.at(key), now);
    pending.forget(key);
  }
  return failed;
}

void Watchdog::remember_timed_out(const OpKey& key, const PendingTensor& tensor,
                                  Clock::time_point now) {
  for (size_t rank = 0; rank < tensor.by_rank.size(); ++rank) {
    if (!tensor.by_rank[rank]) continue;
    auto& recent = timed_out_[rank];
    recent.push_back(TimedOut{quoted(key), now});
    if (recent.size() > kHintNames) recent.pop_front();
  }
}

MissingRankHint Watchdog::hint(int rank, const OpKey& key, const PendingTensors& pending,
                               const std::vector<OpKey>& by_order, Clock::time_point now) const {
  const auto r = static_cast<size_t>(rank);
  MissingRankHint out;
  out.rank = rank;
  for (const OpKey& other : by_order) {
    if (other != key && pending.at(other).by_rank[r])
      out.pending.add([&] { return quoted(other); });
  }
  for (const TimedOut& t : timed_out_[r]) {
    if (now - t.when <= stall_timeout_) out.timed_out.push_back(t.name);
  }
  return out;
}

std::vector<Response> Watchdog::break_deadlock(PendingTensors& pending, Clock::time_point now,
                                               bool progressed, bool stopping) {
  if (!deadlocked(pending, now, progressed, stopping)) return {};
  const std::vector<OpKey> by_order = pending.oldest_first();
  std::vector<RankWait> by_rank;
  for (size_t rank = 0; rank < blocked_.size(); ++rank) {
    by_rank.push_back(wait_of(rank, pending, by_order));
  }
  const std::string message = deadlock_message(deadlock_timeout_, by_rank);
  std::vector<Response> failed;
  for (const OpKey& key : by_order) {
    failed.push_back(error_response(pending.at(key).first_request(), THREELC_EMISMATCH, message));
    pending.forget(key);
  }
  return failed;
}

bool Watchdog::deadlocked(const PendingTensors& pending, Clock::time_point now, bool progressed,
                          bool stopping) {
  bool all_blocked = true;
  for (size_t rank = 0; rank < blocked_.size(); ++rank) {
    if (!blocked_[rank] && !pending.has_joined(rank)) all_blocked = false;
  }
  std::fill(blocked_.begin(), blocked_.end(), 0);
  const bool submitted = std::exchange(submitted_, false);
  if (deadlock_timeout_ <= Clock::duration::zero() || progressed || submitted || stopping ||
      !all_blocked || pending.empty()) {
    stuck_since_.reset();
    return false;
  }
  if (!stuck_since_) stuck_since_ = now;
  if (now - *stuck_since_ < deadlock_timeout_) return false;
  stuck_since_.reset();
  return true;
}

RankWait Watchdog::wait_of(size_t rank, const PendingTensors& pending,
                           const std::vector<OpKey>& by_order) const {
  RankWait wait;
  wait.joined = pending.has_joined(rank);
  if (wait.joined) return wait;
  for (const OpKey& key : by_order) {
    const PendingTensor& tensor = pending.at(key);
    if (!tensor.by_rank[rank]) continue;
    wait.operations.add(
        [&] { return waited_for(*tensor.by_rank[rank], pending.parties(key, tensor)); });
  }
  return wait;
}

}  // namespace threelc::engine
