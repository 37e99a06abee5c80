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

CycleResponse Coordinator::respond() {
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

std::vector<std::string> Coordinator::stall_warnings(Clock::time_point now) {
  return stalls_->check(now);
}

}  // namespace threelc::engine
