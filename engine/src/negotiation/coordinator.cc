#include "negotiation/coordinator.h"

#include <algorithm>

#include "negotiation/consistency.h"
#include "negotiation/fusion.h"
#include "observe/stall_inspector.h"
#include "threelc/threelc.h"

namespace threelc::engine {

Coordinator::Coordinator(const Options& options)
    : options_(options),
      stalls_(std::make_unique<StallInspector>(options.stall_warning, options.size)) {}

Coordinator::~Coordinator() = default;

void Coordinator::add(int rank, std::vector<OpRequest> requests, bool shutdown,
                      Clock::time_point now) {
  if (shutdown && shutdown_rank_ < 0) shutdown_rank_ = rank;
  for (OpRequest& r : requests) {
    auto [it, inserted] = pending_.try_emplace(r.name);
    Pending& p = it->second;
    if (inserted) {
      p.by_rank.resize(static_cast<size_t>(options_.size));
      p.order = next_order_++;
    }
    auto& slot = p.by_rank[static_cast<size_t>(rank)];
    if (slot) {
      throw NegotiationError("rank " + std::to_string(rank) + " submitted tensor '" + r.name +
                             "' twice");
    }
    if (r.kind == OpKind::kJoin) last_joined_ = rank;
    stalls_->submitted(r.name, rank, now);
    slot = std::move(r);
    ++p.submitted;
  }
}

std::vector<int32_t> Coordinator::joined_ranks() const {
  std::vector<int32_t> joined;
  const auto it = pending_.find(kJoinName);
  if (it == pending_.end()) return joined;
  for (size_t r = 0; r < it->second.by_rank.size(); ++r) {
    if (it->second.by_rank[r]) joined.push_back(static_cast<int32_t>(r));
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

CycleResponse Coordinator::respond() {
  CycleResponse out;
  const size_t joined = joined_ranks().size();
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (const auto& [name, p] : pending_) {
    if (name == kJoinName) continue;
    if (static_cast<size_t>(p.submitted) + joined >= static_cast<size_t>(options_.size)) {
      // A joined rank that also submitted the tensor counts once.
      size_t participants = 0;
      const auto join = pending_.find(kJoinName);
      for (size_t r = 0; r < p.by_rank.size(); ++r) {
        const bool has_joined = join != pending_.end() && join->second.by_rank[r].has_value();
        if (p.by_rank[r] || has_joined) ++participants;
      }
      if (participants == static_cast<size_t>(options_.size)) ready.emplace_back(p.order, name);
    }
  }
  std::sort(ready.begin(), ready.end());
  std::vector<Response> singles;
  for (const auto& [order, name] : ready) {
    singles.push_back(decide(name, pending_.at(name)));
    pending_.erase(name);
    stalls_->finished(name);
  }
  out.responses = fuse(std::move(singles), options_.fusion_threshold);
  if (const auto join = pending_.find(kJoinName);
      join != pending_.end() && join->second.submitted == options_.size) {
    Response r;
    r.kind = OpKind::kJoin;
    r.tensors = {*join->second.by_rank[0]};
    r.last_joined_rank = last_joined_;
    out.responses.push_back(std::move(r));
    pending_.erase(join);
    stalls_->finished(kJoinName);
  }
  out.shutdown = shutdown_rank_ >= 0;
  out.shutdown_rank = shutdown_rank_;
  return out;
}

std::vector<std::string> Coordinator::stall_warnings(Clock::time_point now) {
  return stalls_->check(now);
}

}  // namespace threelc::engine
