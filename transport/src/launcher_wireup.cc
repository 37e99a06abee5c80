#include "launcher_wireup.h"

#include <atomic>
#include <cstdio>

#include "auth.h"
#include "host_address.h"
#include "launcher_service.h"
#include "listen_address.h"
#include "threelc/settings/setting.h"

namespace threelc::transport::detail {

std::unique_ptr<LauncherService> open_pmix_service(const Options& options,
                                                   ServiceClock::time_point deadline);
std::unique_ptr<LauncherService> open_pmi2_service(const Options& options,
                                                   ServiceClock::time_point deadline);

namespace {

// Starts of this process that went through the service: each start has keys of its own (a
// start is collective, so every rank counts the same).
std::atomic<int> starts{0};

struct Keys {
  std::string coordinator, secret;
};

Keys keys_of(int start) {
  const std::string number = std::to_string(start);
  return {"threelc.coordinator." + number, "threelc.secret." + number};
}

std::string hex(const Nonce& bytes) {
  std::string text;
  char digits[3];
  for (std::byte b : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", static_cast<unsigned>(b));
    text += digits;
  }
  return text;
}

ServiceClock::time_point start_deadline(const Options& options) {
  return ServiceClock::now() + options.start_timeout;
}

// The fence, and when it runs out of time an error that says why it may have.
void meet_at_fence(const Options& options, LauncherService& service,
                   ServiceClock::time_point deadline) {
  try {
    service.fence(deadline);
  } catch (const Error& e) {
    if (!e.timed_out()) throw;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3g s",
                  std::chrono::duration<double>(options.start_timeout).count());
    throw Error(-1,
                service_prefix(options) + "the launcher's " + service.name() +
                    " fence did not complete within " + seconds +
                    " (THREELC_START_TIMEOUT): not all " + std::to_string(options.size) +
                    " ranks reached it (one has not started threelc, or has died)",
                true);
  }
}

}  // namespace

std::unique_ptr<LauncherService> open_launcher_service(const Options& options,
                                                       ServiceClock::time_point deadline) {
  if (options.wireup == "pmix") return open_pmix_service(options, deadline);
  if (options.wireup == "pmi2") return open_pmi2_service(options, deadline);
  throw Error(-1, service_prefix(options) + "no launcher service '" + options.wireup + "'");
}

std::string coordinator_host_for(const Options& options) {
  if (!options.listen_host.empty()) return resolve_listen_host(options, "");
  if (options.local_size >= options.size) return "127.0.0.1";
  return reachable_host_address();
}

void prepare_launcher_wireup(Options& options) {
  const Keys keys = keys_of(starts++);
  if (options.rank == 0) {
    options.secret = hex(random_nonce());
    options.coordinator_host = coordinator_host_for(options);
    options.coordinator_port = 0;
    return;
  }
  const auto deadline = start_deadline(options);
  auto service = open_launcher_service(options, deadline);
  meet_at_fence(options, *service, deadline);
  const std::string coordinator = service->get_from_rank0(keys.coordinator, deadline);
  options.secret = service->get_from_rank0(keys.secret, deadline);
  service->close();
  const auto parsed = ::threelc::settings::parse_host_port(coordinator);
  if (!parsed || options.secret.empty()) {
    throw Error(0, service_prefix(options) + "rank 0 published a malformed " +
                       std::string(service->name()) + " value: " + keys.coordinator + "='" +
                       coordinator + "'" + (options.secret.empty() ? ", an empty secret" : ""));
  }
  options.coordinator_host = parsed->host;
  options.coordinator_port = parsed->port;
}

void publish_through_launcher(const Options& options) {
  const Keys keys = keys_of(starts - 1);
  const auto deadline = start_deadline(options);
  auto service = open_launcher_service(options, deadline);
  service->put(keys.coordinator,
               host_port_text(options.coordinator_host, options.coordinator_port));
  service->put(keys.secret, options.secret);
  meet_at_fence(options, *service, deadline);
  service->close();
}

}  // namespace threelc::transport::detail
