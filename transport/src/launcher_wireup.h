// The coordinator's address and the job secret through the launcher's wire-up service
// (launcher_service.h), when THREELC_COORDINATOR is unset under mpirun or srun
// (options.wireup). Rank 0 draws a fresh secret and listens on a port the system picks, then
// publishes `host:port` and the secret; the other ranks wait at the service's fence and read
// them. Nothing of it passes through the environment, a command line or a file.
#pragma once

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// Before the rendezvous. Rank 0: a fresh secret and the address its coordinator will listen on
// (port 0). Other ranks: the coordinator and the secret rank 0 published (blocks until rank 0
// published them, at most options.start_timeout). Throws Error naming the service and what
// failed.
void prepare_launcher_wireup(Options& options);

// Rank 0, once its control listener listens on options.coordinator_port: publishes the
// coordinator and the secret and meets the other ranks at the service's fence.
void publish_through_launcher(const Options& options);

// The address rank 0's coordinator listens on when nothing names one: THREELC_IFACE's; else
// 127.0.0.1 when every rank is on this host; else reachable_host_address().
std::string coordinator_host_for(const Options& options);

}  // namespace threelc::transport::detail
