// The coordinator's check that every rank submitted a tensor the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/operation.h"

namespace threelc::engine {

// `by_rank[r]` is rank r's request (nullopt for a rank that takes part without one: joined).
// Returns nullopt when they agree, else a message naming the tensor, the field(s) that differ
// and which ranks sent what, e.g. "tensor 'w': ranks disagree on shape: ranks 0, 2 sent [4, 5];
// rank 1 sent [4, 6]". For allgather and alltoall the first dimension may differ.
std::optional<std::string> check_consistency(const std::string& name,
                                             const std::vector<std::optional<OpRequest>>& by_rank);

// "0-2, 5" for ranks {0, 1, 2, 5} (compact_ranks, observe/stall_inspector.h).
std::string rank_list(const std::vector<int>& ranks);

}  // namespace threelc::engine
