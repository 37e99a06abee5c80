// A launcher's wire-up service: the key-value space with a fence that Open MPI's mpirun and
// Slurm's srun serve every rank of a job (PMIx, or Slurm's PMI-2), loaded at run time. threelc
// uses it once per start, to pass rank 0's coordinator address and a fresh secret to the others
// (launcher_wireup.h). Every call is bounded by a deadline, after which it throws Error.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "rank_prefix.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

using ServiceClock = std::chrono::steady_clock;

class LauncherService {
 public:
  virtual ~LauncherService() = default;
  // "PMIx" or "PMI-2", for messages.
  virtual const char* name() const = 0;
  // Publishes `value` under `key` to every rank of the job (it becomes visible after fence()).
  virtual void put(const std::string& key, const std::string& value) = 0;
  // Returns once every rank of the job has called it (and what they put is visible).
  virtual void fence(ServiceClock::time_point deadline) = 0;
  // What rank 0 put under `key`.
  virtual std::string get_from_rank0(const std::string& key, ServiceClock::time_point deadline) = 0;
  // Done with the service for this start (PMIx: finalized, as mpirun expects of a process
  // that initialized it).
  virtual void close() = 0;
};

// Joins the job's service: options.wireup names which ("pmix" or "pmi2"). Throws Error when
// its library cannot be loaded (saying which package provides it) or the launcher refuses.
std::unique_ptr<LauncherService> open_launcher_service(const Options& options,
                                                       ServiceClock::time_point deadline);

// What a service call returned: its status code, and the text it produced (a got value).
struct ServiceReply {
  int status = 0;
  std::string text;
};

// Runs `call` on a thread of its own and waits for it until `deadline`: the services' calls
// block and cannot be cancelled. Returns its reply, or throws Error "<what> did not complete
// within ..." naming the setting when the deadline passed first (the thread is then left to
// end on its own, and nothing it touches is freed under it).
ServiceReply call_before(ServiceClock::time_point deadline, const std::string& what,
                         std::function<ServiceReply()> call);

// "threelc rank R: " for messages.
inline std::string service_prefix(const Options& options) { return rank_prefix(options.rank); }

}  // namespace threelc::transport::detail
