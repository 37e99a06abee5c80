// Some of a job's ranks seen as a job of their own, so that any collective can run among them
// (THREELC_HIERARCHICAL: the ranks of one host; one rank of every host). Rank i of the subset
// is job rank members[i]; its pairs are the job's data pairs, so a collective run here must use
// a tag range no other collective uses at the same time on the same pairs.
#pragma once

#include <stdexcept>
#include <vector>

#include "threelc/transport/transport.h"

namespace threelc::engine {

class RankSubset : public transport::Context {
 public:
  // `members`: job ranks in the subset's order, distinct, including job.rank(). Throws
  // std::invalid_argument otherwise.
  RankSubset(transport::Context& job, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  transport::Pair& pair(int peer) override;
  // Collectives use only the data pairs; the control channels stay the job's.
  transport::Pair& control(int peer) override;
  // A stop concerns the whole job: these are the job's.
  void stop(const std::string& reason) override { job_.stop(reason); }

  int job_rank(int peer) const { return members_.at(static_cast<size_t>(peer)); }

 private:
  transport::Context& job_;
  std::vector<int> members_;
  int rank_ = -1;
};

}  // namespace threelc::engine
