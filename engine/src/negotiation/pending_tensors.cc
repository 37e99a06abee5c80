#include "negotiation/pending_tensors.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "negotiation/coordinator_messages.h"
#include "negotiation/wire.h"
#include "observe/stall_inspector.h"

namespace threelc::engine {

const OpRequest& PendingTensor::first_request() const {
  for (const auto& r : by_rank) {
    if (r) return *r;
  }
  throw std::logic_error("Coordinator: a pending tensor without a request");
}

PendingTensors::PendingTensors(const ProcessSetTable& sets, Clock::duration stall_warning)
    : sets_(sets), stalls_(std::make_unique<StallInspector>(stall_warning, sets.job_size())) {}

PendingTensors::~PendingTensors() = default;

void PendingTensors::add(int rank, OpRequest request, Clock::time_point now) {
  PendingTensor& tensor = slot_for(request, now);
  auto& slot = tensor.by_rank[static_cast<size_t>(rank)];
  if (slot) throw NegotiationError(submitted_twice_message(rank, request));
  if (request.kind == OpKind::kJoin) last_joined_ = rank;
  tell_stall_inspector(rank, request, now);
  slot = std::move(request);
  ++tensor.submitted;
}

PendingTensor& PendingTensors::slot_for(const OpRequest& request, Clock::time_point now) {
  const auto size = static_cast<size_t>(sets_.job_size());
  if (request.kind == OpKind::kJoin) {
    if (join_.by_rank.empty()) join_.by_rank.resize(size);
    return join_;
  }
  auto [it, inserted] = tensors_.try_emplace(key_of(request));
  if (inserted) {
    it->second.by_rank.resize(size);
    it->second.order = next_order_++;
    it->second.first = now;
  }
  return it->second;
}

void PendingTensors::tell_stall_inspector(int rank, const OpRequest& request,
                                          Clock::time_point now) {
  if (request.kind == OpKind::kJoin) {
    stalls_->submitted(kJoinDisplayName, rank, now);
  } else if (request.process_set == kGlobalProcessSet) {
    stalls_->submitted(request.name, rank, now);
  } else {
    const auto members = sets_.members(request.process_set);  // refusal() found it
    stalls_->submitted(request.name, rank, now, request.process_set, *members);
  }
}

std::vector<OpKey> PendingTensors::oldest_first(const Pick& pick) const {
  std::vector<std::pair<uint64_t, OpKey>> picked;
  for (const auto& [key, tensor] : tensors_) {
    if (!pick || pick(key, tensor)) picked.emplace_back(tensor.order, key);
  }
  std::sort(picked.begin(), picked.end());
  std::vector<OpKey> keys;
  keys.reserve(picked.size());
  for (auto& [order, key] : picked) keys.push_back(std::move(key));
  return keys;
}

std::optional<PendingTensor> PendingTensors::take(const OpKey& key) {
  const auto it = tensors_.find(key);
  if (it == tensors_.end()) return std::nullopt;
  PendingTensor tensor = std::move(it->second);
  forget(key);
  return tensor;
}

void PendingTensors::forget(const OpKey& key) {
  tensors_.erase(key);
  stalls_->finished(key.name, key.process_set);
}

std::vector<int32_t> PendingTensors::expected_ranks(const OpKey& key, OpKind kind) const {
  const auto members =
      sets_.members(negotiated_globally(kind) ? kGlobalProcessSet : key.process_set);
  // A removal forgets its set's tensors first, so a pending tensor's set always exists.
  if (!members) throw std::logic_error("Coordinator: a pending tensor of a removed process set");
  return *members;
}

bool PendingTensors::joins_stand_in(const OpKey& key, OpKind kind) {
  return key.process_set == kGlobalProcessSet && !negotiated_globally(kind);
}

bool PendingTensors::ready(const OpKey& key, const PendingTensor& tensor) const {
  return parties(key, tensor).missing.empty();
}

Parties PendingTensors::parties(const OpKey& key, const PendingTensor& tensor) const {
  Parties out;
  const OpKind kind = tensor.first_request().kind;
  const bool stand_in = joins_stand_in(key, kind);
  for (const int32_t member : expected_ranks(key, kind)) {
    const auto rank = static_cast<size_t>(member);
    if (tensor.by_rank[rank]) {
      out.submitted.push_back(member);
    } else if (stand_in && has_joined(rank)) {
      out.joined.push_back(member);
    } else {
      out.missing.push_back(member);
    }
  }
  return out;
}

bool PendingTensors::has_joined(size_t rank) const {
  return rank < join_.by_rank.size() && join_.by_rank[rank].has_value();
}

std::vector<int32_t> PendingTensors::joined_ranks() const {
  std::vector<int32_t> joined;
  for (size_t r = 0; r < join_.by_rank.size(); ++r) {
    if (join_.by_rank[r]) joined.push_back(static_cast<int32_t>(r));
  }
  return joined;
}

bool PendingTensors::everyone_joined() const { return join_.submitted == sets_.job_size(); }

void PendingTensors::forget_join() {
  join_ = PendingTensor{};
  stalls_->finished(kJoinDisplayName);
}

std::vector<std::string> PendingTensors::stall_warnings(Clock::time_point now) {
  return stalls_->check(now);
}

}  // namespace threelc::engine
