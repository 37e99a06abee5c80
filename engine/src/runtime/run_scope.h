// The ranks one response runs among: the job, or the members of the tensors' process set (a
// RankSubset of the job, in the set's terms: its rank, size and root). Executor::run makes one
// per response and hands it to the collective; nothing of it outlives the call.
#pragma once

#include <cstdint>
#include <span>

#include "negotiation/process_sets.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

struct RunScope {
  transport::Context& ranks;         // the job's context, or the set's RankSubset
  std::span<const int32_t> members;  // the set's job ranks, ascending (unused in the job's set)
  bool global = true;                // process set 0: the job itself

  // The job rank `job_rank`'s index among the ranks.
  int set_rank_of(int job_rank) const {
    return global ? job_rank : member_index(members, job_rank);
  }
};

}  // namespace threelc::engine
