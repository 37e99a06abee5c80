// The Coordinator's decisions (docs/ARCHITECTURE.md, "Negotiation"): which pending tensors are
// ready (every rank they need has submitted them or, for a tensor of the global set, stands in
// for them by joining), what a ready tensor's response is, and when the join completes.
#pragma once

#include <optional>
#include <vector>

#include "negotiation/messages.h"
#include "negotiation/pending_tensors.h"
#include "negotiation/process_sets.h"

namespace threelc::engine {

// The ready tensors, oldest first.
std::vector<OpKey> ready_tensors(const PendingTensors& pending);

// The error response failing a ready tensor that its ranks submitted differently; nullopt
// when they agree.
std::optional<Response> mismatch(const OpKey& key, const PendingTensor& tensor);

// The response that runs a ready tensor (not an add or a removal of a process set) in its
// set: its joined ranks (global set only; broadcast, reducescatter and alltoall fail while any
// rank has joined), allgather's and alltoall's figures in the set's terms.
Response run(const OpKey& key, const PendingTensor& tensor, const PendingTensors& pending,
             const ProcessSetTable& sets);

// The join's response once every rank has joined (naming the rank that joined last); the join
// is forgotten then.
std::optional<Response> completed_join(PendingTensors& pending);

}  // namespace threelc::engine
