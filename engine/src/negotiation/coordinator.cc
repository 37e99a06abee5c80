#include "negotiation/coordinator.h"

#include <algorithm>

#include "negotiation/consistency.h"
#include "negotiation/fusion.h"
#include "observe/stall_inspector.h"
#include "threelc/threelc.h"

namespace threelc::engine {
namespace {

// How many missing ranks a timeout message describes, and how many of each one's names.
constexpr size_t kHintRanks = 4;
constexpr size_t kHintNames = 3;

std::string ranks_text(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

// 'a', 'b' and 'c' / 'a', 'b', 'c' and 2 more
std::string names_text(const std::vector<const std::string*>& names, size_t more) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() && more == 0 ? " and " : ", ";
    out += "'" + *names[i] + "'";
  }
  if (more > 0) out += " and " + std::to_string(more) + " more";
  return out;
}

}  // namespace

Coordinator::Coordinator(const Options& options)
    : options_(options),
      stalls_(std::make_unique<StallInspector>(options.stall_warning, options.size)),
      timed_out_(static_cast<size_t>(std::max(options.size, 1))) {}

Coordinator::~Coordinator() = default;

Coordinator::Pending& Coordinator::join_pending() {
  if (join_.by_rank.empty()) join_.by_rank.resize(static_cast<size_t>(options_.size));
  return join_;
}

bool Coordinator::has_joined(size_t rank) const {
  return rank < join_.by_rank.size() && join_.by_rank[rank].has_value();
}

void Coordinator::add(int rank, std::vector<OpRequest> requests, bool shutdown,
                      Clock::time_point now) {
  if (shutdown && shutdown_rank_ < 0) shutdown_rank_ = rank;
  for (OpRequest& r : requests) {
    const bool join = r.kind == OpKind::kJoin;
    Pending* p = nullptr;
    if (join) {
      p = &join_pending();
    } else {
      auto [it, inserted] = pending_.try_emplace(r.name);
      p = &it->second;
      if (inserted) {
        p->by_rank.resize(static_cast<size_t>(options_.size));
        p->order = next_order_++;
        p->first = now;
      }
    }
    auto& slot = p->by_rank[static_cast<size_t>(rank)];
    if (slot) {
      throw NegotiationError("rank " + std::to_string(rank) + " submitted " +
                             (join ? std::string("join") : "tensor '" + r.name + "'") + " twice");
    }
    if (join) last_joined_ = rank;
    stalls_->submitted(join ? kJoinDisplayName : r.name, rank, now);
    slot = std::move(r);
    ++p->submitted;
  }
}

std::vector<int32_t> Coordinator::joined_ranks() const {
  std::vector<int32_t> joined;
  for (size_t r = 0; r < join_.by_rank.size(); ++r) {
    if (join_.by_rank[r]) joined.push_back(static_cast<int32_t>(r));
  }
  return joined;
}

Response Coordinator::decide(const std::string& name, Pending& pending) const {
  Response response;
  const OpRequest* first = nullptr;
  for (const auto& r : pending.by_rank) {
    if (r && !first) first = &*r;
  }
  response.kind = first->kind;
  auto fail = [&](int code, std::string message) {
    response.type = ResponseType::kError;
    response.error_code = code;
    response.error_message = std::move(message);
    response.tensors = {*first};
    return response;
  };
  if (auto mismatch = check_consistency(name, pending.by_rank)) {
    return fail(THREELC_EMISMATCH, *mismatch);
  }
  response.joined_ranks = joined_ranks();
  if (!response.joined_ranks.empty() &&
      (first->kind == OpKind::kBroadcast || first->kind == OpKind::kReducescatter ||
       first->kind == OpKind::kAlltoall)) {
    std::vector<int> joined(response.joined_ranks.begin(), response.joined_ranks.end());
    return fail(THREELC_EJOINED, std::string(op_kind_name(first->kind)) + " of tensor '" + name +
                                     "' cannot run while rank(s) " + rank_list(joined) +
                                     " have joined");
  }
  response.tensors = {*first};
  const auto size = static_cast<size_t>(options_.size);
  if (first->kind == OpKind::kAllgather) {
    response.per_rank.assign(size, 0);
    for (size_t r = 0; r < size; ++r) {
      if (pending.by_rank[r]) response.per_rank[r] = pending.by_rank[r]->rows();
    }
  } else if (first->kind == OpKind::kAlltoall) {
    response.per_rank.assign(size * size, 0);
    for (size_t r = 0; r < size; ++r) {
      const auto& splits = pending.by_rank[r]->splits;
      for (size_t j = 0; j < size && j < splits.size(); ++j) {
        response.per_rank[r * size + j] = splits[j];
      }
    }
  }
  return response;
}

CycleResponse Coordinator::respond(Clock::time_point now) {
  CycleResponse out;
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (const auto& [name, p] : pending_) {
    size_t participants = 0;  // a joined rank that also submitted the tensor counts once
    for (size_t r = 0; r < p.by_rank.size(); ++r) {
      if (p.by_rank[r] || has_joined(r)) ++participants;
    }
    if (participants == static_cast<size_t>(options_.size)) ready.emplace_back(p.order, name);
  }
  std::sort(ready.begin(), ready.end());
  std::vector<Response> singles;
  for (const auto& [order, name] : ready) {
    singles.push_back(decide(name, pending_.at(name)));
    pending_.erase(name);
    stalls_->finished(name);
  }
  out.responses = fuse(std::move(singles), options_.fusion_threshold);
  for (Response& failed : time_out(now)) out.responses.push_back(std::move(failed));
  if (join_.submitted == options_.size) {
    Response r;
    r.kind = OpKind::kJoin;
    r.tensors = {*join_.by_rank[0]};
    r.last_joined_rank = last_joined_;
    out.responses.push_back(std::move(r));
    join_ = Pending{};
    stalls_->finished(kJoinDisplayName);
  }
  out.shutdown = shutdown_rank_ >= 0;
  out.shutdown_rank = shutdown_rank_;
  return out;
}

std::vector<Response> Coordinator::time_out(Clock::time_point now) {
  std::vector<Response> failed;
  if (options_.stall_timeout <= Clock::duration::zero()) return failed;
  std::vector<std::pair<uint64_t, std::string>> due;
  for (const auto& [name, p] : pending_) {
    if (now - p.first >= options_.stall_timeout) due.emplace_back(p.order, name);
  }
  if (due.empty()) return failed;
  std::sort(due.begin(), due.end());
  // Every pending tensor in arrival order (the due ones too): the hints of the messages.
  std::vector<std::pair<uint64_t, std::string>> by_order;
  by_order.reserve(pending_.size());
  for (const auto& [name, p] : pending_) by_order.emplace_back(p.order, name);
  std::sort(by_order.begin(), by_order.end());
  for (const auto& [order, name] : due) {
    const Pending& p = pending_.at(name);
    Response r;
    r.type = ResponseType::kError;
    r.error_code = THREELC_EMISMATCH;
    r.error_message = timeout_message(name, p, by_order, now);
    for (const auto& request : p.by_rank) {
      if (request && r.tensors.empty()) {
        r.kind = request->kind;
        r.tensors = {*request};
      }
    }
    failed.push_back(std::move(r));
  }
  for (const auto& [order, name] : due) {
    const Pending& p = pending_.at(name);
    for (size_t rank = 0; rank < p.by_rank.size(); ++rank) {
      if (!p.by_rank[rank]) continue;
      auto& recent = timed_out_[rank];
      recent.push_back(TimedOut{name, now});
      if (recent.size() > kHintNames) recent.pop_front();
    }
    pending_.erase(name);
    stalls_->finished(name);
  }
  return failed;
}

std::string Coordinator::timeout_message(
    const std::string& name, const Pending& pending,
    const std::vector<std::pair<uint64_t, std::string>>& by_order, Clock::time_point now) const {
  std::vector<int> submitted;
  std::vector<int> joined;
  std::vector<int> missing;
  for (size_t rank = 0; rank < pending.by_rank.size(); ++rank) {
    const auto r = static_cast<int>(rank);
    if (pending.by_rank[rank]) {
      submitted.push_back(r);
    } else if (has_joined(rank)) {
      joined.push_back(r);
    } else {
      missing.push_back(r);
    }
  }
  std::string message = "tensor '" + name + "' was submitted by " + ranks_text(submitted);
  if (!joined.empty()) {
    message += " (" + ranks_text(joined) + (joined.size() == 1 ? " has" : " have") + " joined)";
  }
  message += " but not by " + ranks_text(missing) + " within " +
             format_seconds(options_.stall_timeout) + " (THREELC_STALL_TIMEOUT)";
  for (size_t i = 0; i < missing.size() && i < kHintRanks; ++i) {
    message += i == 0 ? "; " : ", ";
    message += pending_hint(missing[i], name, by_order, now);
  }
  if (missing.size() > kHintRanks) {
    message += " (" + std::to_string(missing.size() - kHintRanks) + " more ranks missing)";
  }
  return message;
}

std::string Coordinator::pending_hint(int rank, const std::string& name,
                                      const std::vector<std::pair<uint64_t, std::string>>& by_order,
                                      Clock::time_point now) const {
  const auto r = static_cast<size_t>(rank);
  std::vector<const std::string*> pending;
  size_t more = 0;
  for (const auto& [order, other] : by_order) {
    if (other == name || !pending_.at(other).by_rank[r]) continue;
    if (pending.size() < kHintNames) {
      pending.push_back(&other);
    } else {
      ++more;
    }
  }
  std::vector<const std::string*> failed;  // recently timed out, newest last
  for (const TimedOut& t : timed_out_[r]) {
    if (now - t.when <= options_.stall_timeout && pending.size() + failed.size() < kHintNames) {
      failed.push_back(&t.name);
    }
  }
  const std::string who = "rank " + std::to_string(rank);
  if (pending.empty() && failed.empty()) return who + " has nothing pending";
  std::string hint;
  if (!pending.empty()) hint = who + " has " + names_text(pending, more) + " pending";
  if (!failed.empty()) {
    hint += pending.empty() ? who + " had " : " and had ";
    hint += names_text(failed, 0) + " pending until " + (failed.size() == 1 ? "it" : "they") +
            " timed out";
  }
  return hint;
}

std::vector<std::string> Coordinator::stall_warnings(Clock::time_point now) {
  return stalls_->check(now);
}

}  // namespace threelc::engine
