#include "negotiation/process_set_policy.h"

#include <string>

#include "negotiation/coordinator_messages.h"
#include "threelc/threelc.h"

namespace threelc::engine {
namespace {

std::optional<std::string> refusal_message(int rank, const OpRequest& request,
                                           const ProcessSetTable& sets) {
  if (negotiated_globally(request.kind) && request.process_set != kGlobalProcessSet) {
    return not_global_message(rank, request);
  }
  const auto members = sets.members(request.process_set);
  if (!members) return unknown_set_message(rank, request, sets.unknown(request.process_set));
  if (member_index(*members, rank) < 0) return not_member_message(rank, request, *members);
  return std::nullopt;
}

Response invalid(const OpRequest& request, const std::string& reason) {
  return error_response(request, THREELC_EINVAL, process_set_change_message(request.kind, reason));
}

}  // namespace

std::optional<Response> refusal(int rank, const OpRequest& request, const ProcessSetTable& sets) {
  auto message = refusal_message(rank, request, sets);
  if (!message) return std::nullopt;
  Response refused = error_response(request, THREELC_EINVAL, std::move(*message));
  refused.failed_ranks = {rank};
  return refused;
}

Response add_process_set(const OpRequest& add, ProcessSetTable& sets) {
  const std::string wrong = check_members(add.members, sets.job_size());
  if (!wrong.empty()) return invalid(add, wrong);
  if (const auto existing = sets.find(add.members)) {
    return invalid(add, set_exists_reason(add.members, *existing));
  }
  Response response;
  response.kind = OpKind::kAddProcessSet;
  response.tensors = {add};
  response.assigned_set = sets.next_id();
  sets.add(response.assigned_set, add.members);
  return response;
}

void remove_process_set(const OpRequest& removal, ProcessSetTable& sets, PendingTensors& pending,
                        std::vector<Response>& out) {
  const int32_t id = removal.removed_set;
  if (id == kGlobalProcessSet) {
    out.push_back(invalid(removal, global_set_removal_reason()));
    return;
  }
  if (!sets.members(id)) {
    out.push_back(invalid(removal, sets.unknown(id)));
    return;
  }
  // Its pending tensors fail on the ranks that submitted them, oldest first.
  const auto in_set = [id](const OpKey& key, const PendingTensor&) {
    return key.process_set == id;
  };
  for (const OpKey& key : pending.oldest_first(in_set)) {
    const PendingTensor& tensor = pending.at(key);
    const OpRequest& request = tensor.first_request();
    out.push_back(error_response(
        request, THREELC_EINVAL,
        removed_while_pending_message(id, request, pending.parties(key, tensor).submitted)));
    pending.forget(key);
  }
  sets.remove(id);
  Response removed;
  removed.kind = OpKind::kRemoveProcessSet;
  removed.tensors = {removal};
  out.push_back(std::move(removed));
}

}  // namespace threelc::engine
