// The Coordinator's rules for process sets (docs/ARCHITECTURE.md, "Process sets"): who may
// submit in which set, and what adding and removing one does to the coordinator's table. A
// submission in an unknown or removed set, or by a rank outside the set, fails on that rank
// alone (THREELC_EINVAL); an add assigns the next id (never reused) unless a set with the same
// ranks exists; a removal fails the set's pending tensors first.
#pragma once

#include <optional>
#include <vector>

#include "negotiation/messages.h"
#include "negotiation/pending_tensors.h"
#include "negotiation/process_sets.h"

namespace threelc::engine {

// Why `rank` may not submit `request` (its process set is unknown or removed, or the rank is
// not a member; add, remove and join outside the global set): the error response failing it
// on that rank alone; nullopt when it may.
std::optional<Response> refusal(int rank, const OpRequest& request, const ProcessSetTable& sets);

// The response to an add every rank asked for alike: the new set's id, or an error when its
// members are wrong or a set with the same ranks exists.
Response add_process_set(const OpRequest& add, ProcessSetTable& sets);

// The responses to a removal every rank asked for alike: an error for each of the set's
// pending tensors (oldest first; they are forgotten), then the removal; or only an error when
// the set is the global one or unknown.
void remove_process_set(const OpRequest& removal, ProcessSetTable& sets, PendingTensors& pending,
                        std::vector<Response>& out);

}  // namespace threelc::engine
