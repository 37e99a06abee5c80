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

Response error_response(const OpRequest& request, int code, std::string message) {
  Response r;
  r.type = ResponseType::kError;
  r.kind = request.kind;
  r.tensors = {request};
  r.error_code = code;
  r.error_message = std::move(message);
  return r;
}

// "allreduce of tensor 'w' (process set 2)", "add_process_set"
std::string what(const OpRequest& request) {
  if (negotiated_globally(request.kind) || request.kind == OpKind::kBarrier) {
    return op_kind_name(request.kind);
  }
  return std::string(op_kind_name(request.kind)) + " of tensor " + quoted(key_of(request));
}

}  // namespace

const OpRequest& Coordinator::first_request(const Pending& pending) {
  for (const auto& r : pending.by_rank) {
    if (r) return *r;
  }
  throw std::logic_error("Coordinator: a pending tensor without a request");
}

Coordinator::Coordinator(const Options& options)
    : options_(options),
      sets_(options.size),
      stalls_(std::make_unique<StallInspector>(options.stall_warning, options.size)),
      timed_out_(static_cast<size_t>(std::max(options.size, 1))),
      blocked_(static_cast<size_t>(std::max(options.size, 1)), 0) {}

Coordinator::~Coordinator() = default;

Coordinator::Pending& Coordinator::join_pending() {
  if (join_.by_rank.empty()) join_.by_rank.resize(static_cast<size_t>(options_.size));
  return join_;
}

bool Coordinator::has_joined(size_t rank) const {
  return rank < join_.by_rank.size() && join_.by_rank[rank].has_value();
}

std::optional<std::vector<int32_t>> Coordinator::expected_ranks(const OpKey& key,
                                                                OpKind kind) const {
  return sets_.members(negotiated_globally(kind) ? kGlobalProcessSet : key.process_set);
}

std::optional<Response> Coordinator::refusal(int rank, const OpRequest& r) const {
  const std::string who = what(r) + " on rank " + std::to_string(rank) + ": ";
  if (negotiated_globally(r.kind) && r.process_set != kGlobalProcessSet) {
    return error_response(
        r, THREELC_EINVAL,
        who + "runs among every rank, not in process set " + std::to_string(r.process_set));
  }
  const auto members = sets_.members(r.process_set);
  if (!members) return error_response(r, THREELC_EINVAL, who + sets_.unknown(r.process_set));
  if (member_index(*members, rank) < 0) {
    return error_response(r, THREELC_EINVAL,
                          who + "rank " + std::to_string(rank) +
                              " is not a member of process set " + std::to_string(r.process_set) +
                              " (ranks " + members_text(*members) + ")");
  }
  return std::nullopt;
}

void Coordinator::add(int rank, std::vector<OpRequest> requests, bool shutdown,
                      Clock::time_point now, bool blocked) {
  if (shutdown && shutdown_rank_ < 0) shutdown_rank_ = rank;
  blocked_[static_cast<size_t>(rank)] = blocked ? 1 : 0;
  if (!requests.empty()) submitted_ = true;
  for (OpRequest& r : requests) {
    const bool join = r.kind == OpKind::kJoin;
    if (auto refused = refusal(rank, r)) {
      refused->failed_ranks = {rank};
      refused_.push_back(std::move(*refused));
      continue;
    }
    const OpKey key = key_of(r);
    Pending* p = nullptr;
    if (join) {
      p = &join_pending();
    } else {
      auto [it, inserted] = pending_.try_emplace(key);
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
                             (join ? std::string("join") : "tensor " + quoted(key)) + " twice");
    }
    if (join) last_joined_ = rank;
    if (join || key.process_set == kGlobalProcessSet) {
      stalls_->submitted(join ? kJoinDisplayName : r.name, rank, now);
    } else {
      const auto members = sets_.members(key.process_set);  // refusal() found it
      stalls_->submitted(r.name, rank, now, key.process_set, *members);
    }
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

bool Coordinator::ready(const OpKey& key, const Pending& p) const {
  const OpRequest* first = &first_request(p);
  // A joined rank stands in for the tensors of the global set only, never for an add or a
  // removal of a set (which every rank must execute having asked for it).
  const bool joins_count =
      key.process_set == kGlobalProcessSet && !negotiated_globally(first->kind);
  const auto expected = expected_ranks(key, first->kind);
  if (!expected) return false;  // cannot happen: a removal forgets its set's tensors
  for (int32_t r : *expected) {
    const auto rank = static_cast<size_t>(r);
    if (!p.by_rank[rank] && !(joins_count && has_joined(rank))) return false;
  }
  return true;
}

Response Coordinator::decide(const OpKey& key, const Pending& pending) {
  const OpRequest* first = &first_request(pending);
  if (auto mismatch = check_consistency(key.name, pending.by_rank)) {
    if (key.process_set != kGlobalProcessSet)
      *mismatch += " (process set " + std::to_string(key.process_set) + ")";
    return error_response(*first, THREELC_EMISMATCH, *mismatch);
  }
  if (first->kind == OpKind::kAddProcessSet) return add_process_set(*first);
  Response response;
  response.kind = first->kind;
  if (key.process_set == kGlobalProcessSet) response.joined_ranks = joined_ranks();
  if (!response.joined_ranks.empty() &&
      (first->kind == OpKind::kBroadcast || first->kind == OpKind::kReducescatter ||
       first->kind == OpKind::kAlltoall)) {
    std::vector<int> joined(response.joined_ranks.begin(), response.joined_ranks.end());
    return error_response(*first, THREELC_EJOINED,
                          std::string(op_kind_name(first->kind)) + " of tensor '" + key.name +
                              "' cannot run while rank(s) " + rank_list(joined) + " have joined");
  }
  response.tensors = {*first};
  // allgather's and alltoall's figures in the set's terms: member i is its i-th rank.
  const std::vector<int32_t> members = *sets_.members(key.process_set);
  const size_t size = members.size();
  if (first->kind == OpKind::kAllgather) {
    response.per_rank.assign(size, 0);
    for (size_t i = 0; i < size; ++i) {
      const auto& r = pending.by_rank[static_cast<size_t>(members[i])];
      if (r) response.per_rank[i] = r->rows();
    }
  } else if (first->kind == OpKind::kAlltoall) {
    response.per_rank.assign(size * size, 0);
    for (size_t i = 0; i < size; ++i) {
      const auto& splits = pending.by_rank[static_cast<size_t>(members[i])]->splits;
      for (size_t j = 0; j < size && j < splits.size(); ++j) {
        response.per_rank[i * size + j] = splits[j];
      }
    }
  }
  return response;
}

Response Coordinator::add_process_set(const OpRequest& request) {
  const std::string wrong = check_members(request.members, options_.size);
  if (!wrong.empty()) {
    return error_response(request, THREELC_EINVAL, "add_process_set: " + wrong);
  }
  if (const auto existing = sets_.find(request.members)) {
    return error_response(request, THREELC_EINVAL,
                          "add_process_set: a process set of ranks " +
                              members_text(request.members) + " exists already: process set " +
                              std::to_string(*existing) + " has the same ranks");
  }
  Response response;
  response.kind = OpKind::kAddProcessSet;
  response.tensors = {request};
  response.assigned_set = sets_.next_id();
  sets_.add(response.assigned_set, request.members);
  return response;
}

void Coordinator::remove_process_set(const OpKey& key, const Pending& pending,
                                     std::vector<Response>& out) {
  const OpRequest* first = &first_request(pending);
  if (auto mismatch = check_consistency(key.name, pending.by_rank)) {
    out.push_back(error_response(*first, THREELC_EMISMATCH, *mismatch));
    return;
  }
  const int32_t id = first->removed_set;
  if (id == kGlobalProcessSet) {
    out.push_back(error_response(*first, THREELC_EINVAL,
                                 "remove_process_set: the global process set 0 cannot be removed"));
    return;
  }
  if (!sets_.members(id)) {
    out.push_back(
        error_response(*first, THREELC_EINVAL, "remove_process_set: " + sets_.unknown(id)));
    return;
  }
  // Its pending tensors fail on the ranks that submitted them, oldest first.
  ByOrder doomed;
  for (const auto& [k, p] : pending_) {
    if (k.process_set == id) doomed.emplace_back(p.order, k);
  }
  std::sort(doomed.begin(), doomed.end());
  for (const auto& [order, k] : doomed) {
    const Pending& p = pending_.at(k);
    std::vector<int> submitted;
    const OpRequest* request = nullptr;
    for (size_t rank = 0; rank < p.by_rank.size(); ++rank) {
      if (!p.by_rank[rank]) continue;
      submitted.push_back(static_cast<int>(rank));
      if (!request) request = &*p.by_rank[rank];
    }
    out.push_back(error_response(*request, THREELC_EINVAL,
                                 "process set " + std::to_string(id) + " was removed while " +
                                     what(*request) + " was pending (submitted by " +
                                     ranks_text(submitted) + ")"));
    forget(k);
  }
  sets_.remove(id);
  Response removed;
  removed.kind = OpKind::kRemoveProcessSet;
  removed.tensors = {*first};
  out.push_back(std::move(removed));
}

void Coordinator::forget(const OpKey& key) {
  pending_.erase(key);
  stalls_->finished(key.name, key.process_set);
}

CycleResponse Coordinator::respond(Clock::time_point now) {
  CycleResponse out;
  ByOrder ready_keys;
  for (const auto& [key, p] : pending_) {
    if (ready(key, p)) ready_keys.emplace_back(p.order, key);
  }
  std::sort(ready_keys.begin(), ready_keys.end());
  std::vector<Response> singles = std::exchange(refused_, {});
  bool progressed = !ready_keys.empty() || !singles.empty();
  for (const auto& [order, key] : ready_keys) {
    const auto it = pending_.find(key);
    if (it == pending_.end()) continue;  // its set was removed earlier in this cycle
    const Pending p = std::move(it->second);
    forget(key);
    if (first_request(p).kind == OpKind::kRemoveProcessSet) {
      remove_process_set(key, p, singles);
    } else {
      singles.push_back(decide(key, p));
    }
  }
  out.responses = fuse(std::move(singles), options_.fusion_threshold);
  for (Response& failed : time_out(now)) {
    out.responses.push_back(std::move(failed));
    progressed = true;
  }
  if (join_.submitted == options_.size) {
    progressed = true;
    Response r;
    r.kind = OpKind::kJoin;
    r.tensors = {*join_.by_rank[0]};
    r.last_joined_rank = last_joined_;
    out.responses.push_back(std::move(r));
    join_ = Pending{};
    stalls_->finished(kJoinDisplayName);
  }
  for (Response& failed : break_deadlock(now, progressed)) {
    out.responses.push_back(std::move(failed));
  }
  out.shutdown = shutdown_rank_ >= 0;
  out.shutdown_rank = shutdown_rank_;
  return out;
}

std::vector<Response> Coordinator::time_out(Clock::time_point now) {
  std::vector<Response> failed;
  if (options_.stall_timeout <= Clock::duration::zero()) return failed;
  ByOrder due;
  for (const auto& [key, p] : pending_) {
    if (now - p.first >= options_.stall_timeout) due.emplace_back(p.order, key);
  }
  if (due.empty()) return failed;
  std::sort(due.begin(), due.end());
  // Every pending tensor in arrival order (the due ones too): the hints of the messages.
  const ByOrder by_order = pending_by_order();
  for (const auto& [order, key] : due) {
    const Pending& p = pending_.at(key);
    Response r;
    r.type = ResponseType::kError;
    r.error_code = THREELC_EMISMATCH;
    r.error_message = timeout_message(key, p, by_order, now);
    for (const auto& request : p.by_rank) {
      if (request && r.tensors.empty()) {
        r.kind = request->kind;
        r.tensors = {*request};
      }
    }
    failed.push_back(std::move(r));
  }
  for (const auto& [order, key] : due) {
    const Pending& p = pending_.at(key);
    for (size_t rank = 0; rank < p.by_rank.size(); ++rank) {
      if (!p.by_rank[rank]) continue;
      auto& recent = timed_out_[rank];
      recent.push_back(TimedOut{quoted(key), now});
      if (recent.size() > kHintNames) recent.pop_front();
    }
    forget(key);
  }
  return failed;
}

Coordinator::ByOrder Coordinator::pending_by_order() const {
  ByOrder by_order;
  by_order.reserve(pending_.size());
  for (const auto& [key, p] : pending_) by_order.emplace_back(p.order, key);
  std::sort(by_order.begin(), by_order.end());
  return by_order;
}

Coordinator::Parties Coordinator::parties(const OpKey& key, const Pending& pending) const {
  Parties out;
  const OpKind kind = first_request(pending).kind;
  const bool joins_count = key.process_set == kGlobalProcessSet && !negotiated_globally(kind);
  const std::vector<int32_t> expected = *expected_ranks(key, kind);
  for (const int32_t member : expected) {
    const auto rank = static_cast<size_t>(member);
    if (pending.by_rank[rank]) {
      out.submitted.push_back(member);
    } else if (joins_count && has_joined(rank)) {
      out.joined.push_back(member);
    } else {
      out.missing.push_back(member);
    }
  }
  return out;
}

std::string Coordinator::timeout_message(const OpKey& key, const Pending& pending,
                                         const ByOrder& by_order, Clock::time_point now) const {
  const auto [submitted, joined, missing] = parties(key, pending);
  std::string message = "tensor " + quoted(key) + " was submitted by " + ranks_text(submitted);
  if (!joined.empty()) {
    message += " (" + ranks_text(joined) + (joined.size() == 1 ? " has" : " have") + " joined)";
  }
  message += " but not by " + ranks_text(missing) + " within " +
             format_seconds(options_.stall_timeout) + " (THREELC_STALL_TIMEOUT)";
  for (size_t i = 0; i < missing.size() && i < kHintRanks; ++i) {
    message += i == 0 ? "; " : ", ";
    message += pending_hint(missing[i], key, by_order, now);
  }
  if (missing.size() > kHintRanks) {
    message += " (" + std::to_string(missing.size() - kHintRanks) + " more ranks missing)";
  }
  return message;
}

std::string Coordinator::pending_hint(int rank, const OpKey& key, const ByOrder& by_order,
                                      Clock::time_point now) const {
  const auto r = static_cast<size_t>(rank);
  std::vector<std::string> pending;
  size_t more = 0;
  for (const auto& [order, other] : by_order) {
    if (other == key || !pending_.at(other).by_rank[r]) continue;
    if (pending.size() < kHintNames) {
      pending.push_back(quoted(other));
    } else {
      ++more;
    }
  }
  std::vector<std::string> failed;  // recently timed out, newest last
  for (const TimedOut& t : timed_out_[r]) {
    if (now - t.when <= options_.stall_timeout && pending.size() + failed.size() < kHintNames) {
      failed.push_back(t.name);
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

std::vector<Response> Coordinator::break_deadlock(Clock::time_point now, bool progressed) {
  bool all_blocked = true;
  for (size_t rank = 0; rank < blocked_.size(); ++rank) {
    if (!blocked_[rank] && !has_joined(rank)) all_blocked = false;
  }
  std::fill(blocked_.begin(), blocked_.end(), 0);
  const bool submitted = std::exchange(submitted_, false);
  if (options_.deadlock_timeout <= Clock::duration::zero() || progressed || submitted ||
      shutdown_rank_ >= 0 || !all_blocked || pending_.empty()) {
    stuck_since_.reset();
    return {};
  }
  if (!stuck_since_) stuck_since_ = now;
  if (now - *stuck_since_ < options_.deadlock_timeout) return {};
  stuck_since_.reset();
  const ByOrder by_order = pending_by_order();
  const std::string message = deadlock_message(by_order);
  std::vector<Response> failed;
  for (const auto& [order, key] : by_order) {
    failed.push_back(error_response(first_request(pending_.at(key)), THREELC_EMISMATCH, message));
    forget(key);
  }
  return failed;
}

std::string Coordinator::deadlock_message(const ByOrder& by_order) const {
  // What each rank waits for, ranks waiting for the same grouped: "rank 1 waits for barrier
  // (submitted by rank 1, not by rank 0)".
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (size_t r = 0; r < blocked_.size(); ++r) {
    std::string waits;
    if (has_joined(r)) {
      waits = "has joined";
    } else {
      std::vector<std::string> names;
      size_t more = 0;
      for (const auto& [order, key] : by_order) {
        const Pending& p = pending_.at(key);
        if (!p.by_rank[r]) continue;
        if (names.size() == kHintNames) {
          ++more;
          continue;
        }
        const Parties who = parties(key, p);
        std::string name = what(*p.by_rank[r]) + " (submitted by " + ranks_text(who.submitted);
        if (!who.joined.empty()) name += ", " + ranks_text(who.joined) + " joined";
        if (!who.missing.empty()) name += ", not by " + ranks_text(who.missing);
        names.push_back(name + ")");
      }
      waits = names.empty() ? "has nothing pending" : "waits for " + names_text(names, more);
    }
    const auto same = std::find_if(groups.begin(), groups.end(),
                                   [&](const auto& group) { return group.first == waits; });
    if (same != groups.end()) {
      same->second.push_back(static_cast<int>(r));
    } else {
      groups.emplace_back(waits, std::vector<int>{static_cast<int>(r)});
    }
  }
  std::string message =
      "deadlock: every rank has been blocked waiting for operations that cannot run for " +
      format_seconds(options_.deadlock_timeout) + " (THREELC_TIMEOUT): ";
  for (size_t i = 0; i < groups.size() && i < kHintRanks; ++i) {
    auto& [waits, ranks] = groups[i];
    if (i > 0) message += "; ";
    if (ranks.size() > 1 && waits.rfind("waits ", 0) == 0) waits.replace(0, 5, "wait");
    if (ranks.size() > 1 && waits.rfind("has ", 0) == 0) waits.replace(0, 3, "have");
    message += ranks_text(ranks) + " " + waits;
  }
  if (groups.size() > kHintRanks) {
    message += " (and " + std::to_string(groups.size() - kHintRanks) + " more groups of ranks)";
  }
  return message;
}

std::vector<std::string> Coordinator::stall_warnings(Clock::time_point now) {
  return stalls_->check(now);
}

}  // namespace threelc::engine
