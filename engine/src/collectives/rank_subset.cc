#include "collectives/rank_subset.h"

#include <set>
#include <string>
#include <utility>

namespace threelc::engine {

RankSubset::RankSubset(transport::Context& job, std::vector<int> members)
    : job_(job), members_(std::move(members)) {
  std::set<int> seen;
  for (size_t i = 0; i < members_.size(); ++i) {
    const int r = members_[i];
    if (r < 0 || r >= job.size() || !seen.insert(r).second) {
      throw std::invalid_argument("RankSubset: member " + std::to_string(r) +
                                  " is not a distinct rank of a job of " +
                                  std::to_string(job.size()));
    }
    if (r == job.rank()) rank_ = static_cast<int>(i);
  }
  if (rank_ < 0) {
    throw std::invalid_argument("RankSubset: rank " + std::to_string(job.rank()) +
                                " is not among the members");
  }
}

transport::Pair& RankSubset::pair(int peer) {
  if (peer < 0 || peer >= size() || peer == rank_) {
    throw std::invalid_argument("RankSubset: no data pair to member " + std::to_string(peer));
  }
  return job_.pair(members_[static_cast<size_t>(peer)]);
}

transport::Pair& RankSubset::control(int /*peer*/) {
  throw std::logic_error("RankSubset: collectives among a subset of ranks use no control channel");
}

}  // namespace threelc::engine
