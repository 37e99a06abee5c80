#include "negotiation/readiness.h"

#include "negotiation/consistency.h"
#include "negotiation/coordinator_messages.h"
#include "threelc/threelc.h"

namespace threelc::engine {
namespace {

// Operations every rank must send data to or receive data from: none can run with a joined
// rank, which has neither.
bool needs_every_rank(OpKind kind) {
  return kind == OpKind::kBroadcast || kind == OpKind::kReducescatter || kind == OpKind::kAlltoall;
}

// allgather: the first dimension of every member (0 for a joined rank); alltoall: the rows
// member i sends member j at [i * size + j]. Member i is the set's i-th rank.
std::vector<int64_t> per_rank_figures(OpKind kind, const PendingTensor& tensor,
                                      const std::vector<int32_t>& members) {
  const size_t size = members.size();
  std::vector<int64_t> out;
  if (kind == OpKind::kAllgather) {
    out.assign(size, 0);
    for (size_t i = 0; i < size; ++i) {
      const auto& r = tensor.by_rank[static_cast<size_t>(members[i])];
      if (r) out[i] = r->rows();
    }
  } else if (kind == OpKind::kAlltoall) {
    out.assign(size * size, 0);
    for (size_t i = 0; i < size; ++i) {
      const auto& splits = tensor.by_rank[static_cast<size_t>(members[i])]->splits;
      for (size_t j = 0; j < size && j < splits.size(); ++j) out[i * size + j] = splits[j];
    }
  }
  return out;
}

}  // namespace

std::vector<OpKey> ready_tensors(const PendingTensors& pending) {
  return pending.oldest_first(
      [&](const OpKey& key, const PendingTensor& tensor) { return pending.ready(key, tensor); });
}

std::optional<Response> mismatch(const OpKey& key, const PendingTensor& tensor) {
  auto found = check_consistency(key.name, tensor.by_rank);
  if (!found) return std::nullopt;
  return error_response(tensor.first_request(), THREELC_EMISMATCH,
                        mismatch_message(key, std::move(*found)));
}

Response run(const OpKey& key, const PendingTensor& tensor, const PendingTensors& pending,
             const ProcessSetTable& sets) {
  const OpRequest& first = tensor.first_request();
  Response response;
  response.kind = first.kind;
  if (key.process_set == kGlobalProcessSet) response.joined_ranks = pending.joined_ranks();
  if (!response.joined_ranks.empty() && needs_every_rank(first.kind)) {
    return error_response(first, THREELC_EJOINED, joined_message(first, response.joined_ranks));
  }
  response.tensors = {first};
  response.per_rank = per_rank_figures(first.kind, tensor, *sets.members(key.process_set));
  return response;
}

std::optional<Response> completed_join(PendingTensors& pending) {
  if (!pending.everyone_joined()) return std::nullopt;
  Response r;
  r.kind = OpKind::kJoin;
  r.tensors = {pending.join_request()};
  r.last_joined_rank = pending.last_joined();
  pending.forget_join();
  return r;
}

}  // namespace threelc::engine
