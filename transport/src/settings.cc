// The single table of environment variables the transport reads, and options_from_environment()
// over it, and ucx_variable() for UCX's own variables. Nothing else in transport/ calls
// getenv().
#include "settings.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "threelc/transport/transport.h"

namespace threelc::transport {
namespace detail {
namespace {

constexpr Setting kSettings[] = {
    {"THREELC_RANK", "0", "this process's rank in the job (threelcrun sets it)"},
    {"THREELC_SIZE", "1", "number of ranks in the job"},
    {"THREELC_LOCAL_RANK", "0", "rank among the processes on this host"},
    {"THREELC_LOCAL_SIZE", "1", "number of ranks on this host"},
    {"THREELC_COORDINATOR", "",
     "host:port of rank 0's control listener (rendezvous); required when size > 1 unless "
     "torchrun's MASTER_ADDR/MASTER_PORT are set"},
    {"THREELC_SECRET", "", "job secret that authenticates every connection (required, size > 1)"},
    {"THREELC_IFACE", "",
     "interface name (eth0) or address the data listener binds to, and with ucx UCX's network "
     "device unless UCX_NET_DEVICES is set; default: the local address of the connection to "
     "the coordinator"},
    {"THREELC_TRANSPORT", "tcp", "tcp, or ucx (data channels over UCX)"},
    {"THREELC_START_TIMEOUT", "60", "seconds the rendezvous may take (fractional allowed)"},
    {"THREELC_TIMEOUT", "30", "seconds any other wait (a send, a receive) may take"},
    {"THREELC_MAX_MESSAGE_BYTES", "2147483648", "hard limit on one message's length"},
    {"THREELC_TRANSPORT_DEBUG", "0", "1: log listener addresses and connections to stderr"},
    // Fallbacks when THREELC_RANK is not set, in this order.
    {"OMPI_COMM_WORLD_RANK", "", "mpirun: rank (with OMPI_COMM_WORLD_SIZE/LOCAL_RANK/LOCAL_SIZE)"},
    {"OMPI_COMM_WORLD_SIZE", "", "mpirun: size"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "0", "mpirun: local rank"},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", "1", "mpirun: local size"},
    {"SLURM_PROCID", "", "srun: rank"},
    {"SLURM_NTASKS", "", "srun: size"},
    {"SLURM_LOCALID", "0", "srun: local rank"},
    {"SLURM_NTASKS_PER_NODE", "1",
     "srun: local size when it is a plain number (else 1; \"2(x3)\" forms are not parsed)"},
    {"RANK", "", "torchrun: rank"},
    {"WORLD_SIZE", "", "torchrun: size"},
    {"LOCAL_RANK", "0", "torchrun: local rank"},
    {"LOCAL_WORLD_SIZE", "1", "torchrun: local size"},
    {"MASTER_ADDR", "", "torchrun: coordinator host when THREELC_COORDINATOR is unset"},
    {"MASTER_PORT", "",
     "torchrun: the coordinator listens on MASTER_PORT + 1 (MASTER_PORT is torch's own store)"},
};

const Setting& lookup(std::string_view name) {
  for (const auto& setting : kSettings) {
    if (name == setting.name) return setting;
  }
  std::abort();  // a name missing from the table is a bug in this file
}

// The variable's value when set and non-empty.
std::optional<std::string> raw(std::string_view name) {
  const char* value = std::getenv(lookup(name).name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string value_or_default(std::string_view name) {
  auto value = raw(name);
  return value ? *value : std::string(lookup(name).default_value);
}

[[noreturn]] void malformed(std::string_view name, const std::string& value,
                            std::string_view expected) {
  throw Error(-1,
              "threelc: " + std::string(name) + "='" + value + "' is not " + std::string(expected));
}

long long parse_integer(std::string_view name, const std::string& value, long long min,
                        long long max) {
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || end != value.c_str() + value.size() || errno != 0 || parsed < min ||
      parsed > max) {
    malformed(name, value,
              "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return parsed;
}

int integer_setting(std::string_view name, long long min, long long max) {
  return static_cast<int>(parse_integer(name, value_or_default(name), min, max));
}

std::chrono::milliseconds seconds_setting(std::string_view name) {
  const std::string value = value_or_default(name);
  errno = 0;
  char* end = nullptr;
  const double seconds = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || errno != 0 ||
      !std::isfinite(seconds) || seconds <= 0 || seconds > 1e7) {
    malformed(name, value, "a positive number of seconds");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
}

void parse_host_port(std::string_view name, const std::string& value, Options& options) {
  // host:port or [v6-address]:port
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
    malformed(name, value, "host:port");
  }
  std::string host = value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  options.coordinator_host = host;
  options.coordinator_port =
      static_cast<uint16_t>(parse_integer(name, value.substr(colon + 1), 1, 65535));
}

}  // namespace

std::span<const Setting> settings() { return kSettings; }

}  // namespace detail

Options options_from_environment() {
  using detail::integer_setting;
  using detail::raw;
  Options options;
  constexpr long long kMaxRanks = 1 << 20;
  // Identity: the first launcher whose rank variable is set.
  struct Source {
    const char *rank, *size, *local_rank, *local_size;
  };
  constexpr Source kSources[] = {
      {"THREELC_RANK", "THREELC_SIZE", "THREELC_LOCAL_RANK", "THREELC_LOCAL_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
  };
  const Source* source = &kSources[0];
  for (const auto& candidate : kSources) {
    if (raw(candidate.rank)) {
      source = &candidate;
      break;
    }
  }
  if (source != &kSources[0] && !raw(source->size)) {
    throw Error(
        -1, std::string("threelc: ") + source->rank + " is set but " + source->size + " is not");
  }
  options.size = integer_setting(source->size, 1, kMaxRanks);
  options.rank = integer_setting(source->rank, 0, kMaxRanks - 1);
  if (options.rank >= options.size) {
    throw Error(-1, std::string("threelc: ") + source->rank + "=" + std::to_string(options.rank) +
                        " is not below " + source->size + "=" + std::to_string(options.size));
  }
  options.local_rank = integer_setting(source->local_rank, 0, kMaxRanks - 1);
  if (source == &kSources[2]) {
    // SLURM_NTASKS_PER_NODE may read "2(x3),1": only a plain number is used.
    const std::string per_node = detail::value_or_default(source->local_size);
    options.local_size = per_node.find_first_not_of("0123456789") == std::string::npos
                             ? integer_setting(source->local_size, 1, kMaxRanks)
                             : 1;
  } else {
    options.local_size = integer_setting(source->local_size, 1, kMaxRanks);
  }

  if (auto coordinator = raw("THREELC_COORDINATOR")) {
    detail::parse_host_port("THREELC_COORDINATOR", *coordinator, options);
  } else if (auto master = raw("MASTER_ADDR")) {
    // torchrun: MASTER_PORT is torch's own TCPStore; the coordinator takes the next port.
    auto port = raw("MASTER_PORT");
    if (!port) throw Error(-1, "threelc: MASTER_ADDR is set but MASTER_PORT is not");
    options.coordinator_host = *master;
    options.coordinator_port =
        static_cast<uint16_t>(detail::parse_integer("MASTER_PORT", *port, 1, 65534) + 1);
  } else if (options.size > 1) {
    throw Error(-1,
                "threelc: THREELC_COORDINATOR (host:port of rank 0) is not set and the job has " +
                    std::to_string(options.size) + " ranks");
  }
  options.secret = detail::value_or_default("THREELC_SECRET");
  options.listen_host = detail::value_or_default("THREELC_IFACE");
  options.transport = detail::value_or_default("THREELC_TRANSPORT");
  if (options.transport != "tcp" && options.transport != "ucx") {
    detail::malformed("THREELC_TRANSPORT", options.transport, "tcp or ucx");
  }
  options.start_timeout = detail::seconds_setting("THREELC_START_TIMEOUT");
  options.timeout = detail::seconds_setting("THREELC_TIMEOUT");
  options.max_message_bytes = static_cast<size_t>(
      detail::parse_integer("THREELC_MAX_MESSAGE_BYTES",
                            detail::value_or_default("THREELC_MAX_MESSAGE_BYTES"), 0, (1LL << 48)));
  options.debug = detail::integer_setting("THREELC_TRANSPORT_DEBUG", 0, 1) != 0;
  return options;
}

namespace detail {

std::string ucx_variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace detail

}  // namespace threelc::transport
