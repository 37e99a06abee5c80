// Which ranks share a host: at init every rank tells the coordinator its host name, and learns
// its host's index among the job's hosts (cross rank) and the number of hosts (cross size).
#pragma once

#include "threelc/transport/transport.h"

namespace threelc::engine {

struct Identity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

// Collective over the control channels; hosts are numbered in order of their lowest rank.
// `host` is this rank's host name (THREELC_HOSTNAME or gethostname()).
Identity exchange_identity(transport::Context& context, const transport::Options& options,
                           const std::string& host);

}  // namespace threelc::engine
