// Which ranks share a host: at init every rank tells the coordinator its host name, and learns
// every rank's host index (hosts numbered in order of their lowest rank), hence its own host's
// index (cross rank) and the number of hosts (cross size).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "threelc/transport/transport.h"

namespace threelc::engine {

struct Identity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // the launcher's (THREELC_LOCAL_RANK)
  int local_size = 1;  // the launcher's (THREELC_LOCAL_SIZE)
  int cross_rank = 0;
  int cross_size = 1;
  std::vector<int> host_of_rank;  // size entries: each rank's host index
};

// Collective over the control channels. `host` is this rank's host name (THREELC_HOSTNAME or
// gethostname()).
Identity exchange_identity(transport::Context& context, const transport::Options& options,
                           const std::string& host);

// Whether every host runs the same number of ranks (Horovod's is_homogeneous).
bool same_ranks_per_host(const Identity& identity);

// The rank groups of THREELC_HIERARCHICAL: `local` holds the ranks of this rank's host in rank
// order; `cross` holds, from every host in host order, the rank at this rank's position in
// `local`. Members are ranks of the job.
struct HostGroups {
  std::vector<int> local;
  std::vector<int> cross;
  int local_index = 0;  // this rank's position in `local`
  int cross_index = 0;  // this rank's position in `cross` (its host's index)
};

// The groups when every host has the same number of ranks, more than one; otherwise nullopt
// and `why_not` says why (one rank per host, or hosts with different numbers of ranks).
std::optional<HostGroups> host_groups(const Identity& identity, std::string& why_not);

}  // namespace threelc::engine
