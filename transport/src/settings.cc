// The single table of environment variables the transport reads, and options_from_environment()
// over it, and ucx_variable() for UCX's own variables. Nothing else in transport/ calls
// getenv().
#include "settings.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "slurm_tasks.h"
#include "threelc/transport/transport.h"

namespace threelc::transport {
namespace config = ::threelc::settings;
namespace detail {
namespace {

using config::Setting;
using config::Type;

constexpr long long kMaxRanks = 1 << 20;

constexpr Setting kSettings[] = {
    {"THREELC_RANK", Type::kInteger, "0", "an integer from 0 to 1048575, below THREELC_SIZE",
     "this process's rank in the job (threelcrun sets it)", ""},
    {"THREELC_SIZE", Type::kInteger, "1", "an integer from 1 to 1048576",
     "number of ranks in the job", ""},
    {"THREELC_LOCAL_RANK", Type::kInteger, "0", "an integer from 0 to 1048575",
     "rank among the processes on this host", ""},
    {"THREELC_LOCAL_SIZE", Type::kInteger, "1", "an integer from 1 to 1048576",
     "number of ranks on this host", ""},
    {"THREELC_COORDINATOR", Type::kHostPort, "", "host:port or [v6-address]:port, port 1 to 65535",
     "`host:port` of rank 0's control listener (rendezvous); when size > 1, threelcrun sets "
     "it, mpirun's and srun's PMIx or PMI-2 carry it, else torchrun's "
     "`MASTER_ADDR`/`MASTER_PORT` give it, else it is required",
     "`host:port` of rank 0's control listener; when size > 1 and it is unset: under torchrun "
     "`threelc.torch` sets it (else it is `MASTER_ADDR:(MASTER_PORT+1)`); under mpirun or srun "
     "rank 0 publishes it through the launcher's PMIx or PMI-2 (`PMIX_NAMESPACE`, `PMI_FD`); "
     "elsewhere it is required"},
    {"THREELC_SECRET", Type::kText, "", "any text",
     "job secret that authenticates every connection; when size > 1, threelcrun makes a fresh "
     "one, and so does rank 0 under mpirun or srun without `THREELC_COORDINATOR` (set both or "
     "neither)",
     ""},
    {"THREELC_IFACE", Type::kText, "", "an interface name or an address",
     "interface name (`eth0`) or address the data listener binds to, and with `ucx` UCX's network "
     "device unless `UCX_NET_DEVICES` is set; unset: the local address of the connection to the "
     "coordinator",
     "interface name (`eth0`) or address the data listener binds to; unset: the local address "
     "of the connection to the coordinator. With `ucx`, the interface of UCX's network traffic: "
     "unless `UCX_NET_DEVICES` is set, UCX's devices become that interface plus every RDMA port "
     "of the host (InfiniBand and RoCE stay in use)"},
    {"THREELC_TRANSPORT", Type::kChoice, "tcp", "tcp or ucx",
     "`tcp`, or `ucx`: the data channels over UCX (needs a build with libucx-dev)",
     "`tcp`, or `ucx`: the data channels over UCX, the rendezvous and the control channels "
     "still over the authenticated TCP connections. A build made without UCX (libucx-dev absent "
     "when CMake ran) refuses `ucx` with an error saying so"},
    {"THREELC_START_TIMEOUT", Type::kSeconds, "60",
     "a number of seconds > 0 and <= 10000000 (fractions allowed)",
     "seconds the rendezvous may take; then an error naming the missing ranks", ""},
    {"THREELC_TIMEOUT", Type::kSeconds, "30",
     "a number of seconds > 0 and <= 10000000 (fractions allowed)",
     "seconds any other wait (a send, a receive) may take; then an error naming the peer",
     "seconds any other wait (a send, a receive) may take; then an error naming the peer. A "
     "quarter of it (at most 3 s) before then, the wait asks the peer what it waits for: a peer "
     "that waits for another rank is not blamed but waited for, up to three times "
     "`THREELC_TIMEOUT` in all (docs/RELIABILITY.md, \"Whom a timeout blames\"). The engine's "
     "operations fail (THREELC_EMISMATCH) when every rank has been blocked waiting for "
     "operations that cannot run for this long, a deadlock (docs/ARCHITECTURE.md, "
     "\"Negotiation\")"},
    {"THREELC_MAX_MESSAGE_BYTES", Type::kBytes, "2147483648",
     "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), up to 2^48",
     "hard limit on one frame's length field", ""},
    {"THREELC_TRANSPORT_DEBUG", Type::kFlag, "0", "0 or 1",
     "1: log listener addresses and accepted connections to stderr (with `ucx`, each endpoint's "
     "transports too)",
     ""},
    // Fallbacks when THREELC_RANK is not set, in this order.
    {"OMPI_COMM_WORLD_RANK", Type::kInteger, "", "an integer from 0 to 1048575",
     "mpirun: the rank (with `OMPI_COMM_WORLD_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`)", ""},
    {"OMPI_COMM_WORLD_SIZE", Type::kInteger, "", "an integer from 1 to 1048576", "mpirun: the size",
     ""},
    {"OMPI_COMM_WORLD_LOCAL_RANK", Type::kInteger, "0", "an integer from 0 to 1048575",
     "mpirun: the local rank", ""},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", Type::kInteger, "1", "an integer from 1 to 1048576",
     "mpirun: the local size", ""},
    {"SLURM_PROCID", Type::kInteger, "", "an integer from 0 to 1048575", "srun: the rank", ""},
    {"SLURM_STEP_NUM_TASKS", Type::kInteger, "", "an integer from 1 to 1048576",
     "srun: the size (the job step's tasks)", ""},
    {"SLURM_NTASKS", Type::kInteger, "", "an integer from 1 to 1048576",
     "srun: the size when `SLURM_STEP_NUM_TASKS` is unset", ""},
    {"SLURM_LOCALID", Type::kInteger, "0", "an integer from 0 to 1048575", "srun: the local rank",
     ""},
    {"SLURM_STEP_ID", Type::kText, "", "set by srun",
     "srun: set in a job step's tasks; unset in a batch script itself, whose one process is "
     "not a job of `SLURM_NTASKS` ranks (the error says to start the ranks with srun)",
     ""},
    {"SLURM_NODEID", Type::kInteger, "0", "an integer from 0 to 1048575",
     "srun: this node's index in the step, for the tasks-per-node lists", ""},
    {"SLURM_STEP_TASKS_PER_NODE", Type::kText, "", "Slurm's list: `4`, `2(x3),1`",
     "srun: the local size, the list's entry at `SLURM_NODEID`", ""},
    {"SLURM_TASKS_PER_NODE", Type::kText, "", "Slurm's list: `4`, `2(x3),1`",
     "srun: the local size when `SLURM_STEP_TASKS_PER_NODE` is unset", ""},
    {"SLURM_NTASKS_PER_NODE", Type::kText, "1", "Slurm's list: `4`, `2(x3),1`",
     "srun: the local size when neither list above is set", ""},
    // The launcher's wire-up service, when THREELC_COORDINATOR is unset and the job has ranks.
    {"PMIX_NAMESPACE", Type::kText, "", "set by a PMIx server",
     "mpirun, `srun --mpi=pmix`: with `PMIX_RANK`, the coordinator and the secret pass through "
     "the launcher's PMIx (libpmix.so.2, loaded then)",
     ""},
    {"PMIX_RANK", Type::kInteger, "", "an integer from 0 to 1048575",
     "PMIx's rank of this process (it must equal the launcher's rank)", ""},
    {"PMI_FD", Type::kText, "", "set by srun --mpi=pmi2",
     "`srun --mpi=pmi2`: with `PMI_RANK`, the coordinator and the secret pass through Slurm's "
     "PMI-2 (libpmi2.so.0, loaded then)",
     ""},
    {"PMI_RANK", Type::kInteger, "", "an integer from 0 to 1048575",
     "PMI-2's rank of this process (it must equal the launcher's rank)", ""},
    {"RANK", Type::kInteger, "", "an integer from 0 to 1048575", "torchrun: the rank", ""},
    {"WORLD_SIZE", Type::kInteger, "", "an integer from 1 to 1048576", "torchrun: the size", ""},
    {"LOCAL_RANK", Type::kInteger, "0", "an integer from 0 to 1048575", "torchrun: the local rank",
     ""},
    {"LOCAL_WORLD_SIZE", Type::kInteger, "1", "an integer from 1 to 1048576",
     "torchrun: the local size", ""},
    {"MASTER_ADDR", Type::kText, "", "a host name or address",
     "torchrun: the coordinator's host when `THREELC_COORDINATOR` is unset", ""},
    {"MASTER_PORT", Type::kInteger, "", "an integer from 1 to 65534",
     "torchrun: the coordinator listens on `MASTER_PORT` + 1 (`MASTER_PORT` is torch's own store)",
     ""},
};

[[noreturn]] void refuse(const Setting& row, const std::string& value) {
  throw Error(-1, "threelc: " + config::refusal(row, value));
}

std::string text_of(const Setting& row) {
  return config::value_or_default(row, config::process_environment);
}

long long integer_of(std::string_view name, long long min, long long max) {
  const Setting& row = setting(name);
  const std::string value = text_of(row);
  const auto parsed = config::parse_integer(value, static_cast<uint64_t>(max));
  if (!parsed || static_cast<long long>(*parsed) < min) refuse(row, value);
  return static_cast<long long>(*parsed);
}

std::chrono::milliseconds seconds_of(std::string_view name) {
  const Setting& row = setting(name);
  const std::string value = text_of(row);
  const auto seconds = config::parse_number(value);
  if (!seconds || *seconds <= 0 || *seconds > 1e7) refuse(row, value);
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(*seconds * 1000.0)));
}

bool is_set(std::string_view name) {
  return config::process_environment(setting(name).name).has_value();
}

// srun's local size: the entry at SLURM_NODEID of the first tasks-per-node list that is set.
int slurm_local_size() {
  for (const char* name :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    if (!is_set(name)) continue;
    const Setting& row = setting(name);
    const std::string list = text_of(row);
    const long long node = integer_of("SLURM_NODEID", 0, kMaxRanks - 1);
    const auto tasks = slurm_tasks_on_node(list, node);
    if (!tasks) {
      throw Error(-1, "threelc: " + std::string(name) + "='" + list +
                          "' is not Slurm's tasks-per-node list (counts from 1 to 1048576, "
                          "'N(xR)' for R nodes of N, separated by commas) with an entry for "
                          "SLURM_NODEID=" +
                          std::to_string(node));
    }
    return static_cast<int>(*tasks);
  }
  return 1;
}

// How the ranks meet when THREELC_COORDINATOR is unset: the launcher's PMIx or PMI-2, or an
// error that says what to set.
std::string launcher_wireup(const std::string& launcher, int size) {
  if (is_set("THREELC_SECRET")) {
    throw Error(-1,
                "threelc: THREELC_SECRET is set but THREELC_COORDINATOR is not: set both (the "
                "same on every rank), or neither, and " +
                    launcher + " passes rank 0's address and a fresh secret to every rank itself");
  }
  if (is_set("PMIX_NAMESPACE") && is_set("PMIX_RANK")) return "pmix";
  if (is_set("PMI_FD") && is_set("PMI_RANK")) return "pmi2";
  const std::string set_both =
      "give every rank THREELC_COORDINATOR=<rank 0's host>:<a free port> and one "
      "THREELC_SECRET (export THREELC_SECRET=$(python3 -c 'import secrets; "
      "print(secrets.token_hex(32))'))";
  std::string how;
  if (launcher == "srun" && !is_set("SLURM_STEP_ID")) {
    how = "this process is Slurm's batch script itself (SLURM_STEP_ID is unset), not one of " +
          std::to_string(size) +
          " tasks of a job step: start the ranks with srun inside the script ('srun python3 "
          "train.py')";
  } else if (launcher == "srun") {
    how =
        "srun offers neither PMIx nor PMI-2 to this step (--mpi=none?): start it with "
        "'srun --mpi=pmix' or 'srun --mpi=pmi2' ('srun --mpi=list' lists what this Slurm "
        "has), or " +
        set_both;
  } else if (launcher == "mpirun") {
    how = "this mpirun serves no PMIx (PMIX_NAMESPACE is unset): " + set_both +
          " and pass them with -x THREELC_COORDINATOR -x THREELC_SECRET";
  } else {
    how = "start the job with threelcrun, mpirun or 'srun --mpi=pmix', or " + set_both;
  }
  throw Error(-1, "threelc: the job has " + std::to_string(size) +
                      " ranks but no way to meet: THREELC_COORDINATOR is unset and " + how);
}

}  // namespace

std::span<const Setting> settings() { return kSettings; }

const Setting& setting(std::string_view name) {
  if (const Setting* row = config::find(kSettings, name)) return *row;
  std::abort();  // a name missing from the table is a bug in this file
}

}  // namespace detail

config::SettingTable transport_settings() { return {"transport", detail::settings()}; }

Options options_from_environment() {
  using detail::integer_of;
  using detail::is_set;
  Options options;
  constexpr long long kMaxRanks = detail::kMaxRanks;
  // Identity: the first launcher whose rank variable is set.
  struct Source {
    const char *launcher, *rank, *size, *local_rank, *local_size;
  };
  constexpr Source kSources[] = {
      {"threelcrun", "THREELC_RANK", "THREELC_SIZE", "THREELC_LOCAL_RANK", "THREELC_LOCAL_SIZE"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
  };
  const Source* source = &kSources[0];
  for (const auto& candidate : kSources) {
    if (is_set(candidate.rank)) {
      source = &candidate;
      break;
    }
  }
  const bool slurm = source->local_size == nullptr;
  const char* size_name =
      slurm && is_set("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : source->size;
  if (source != &kSources[0] && !is_set(size_name)) {
    throw Error(-1,
                std::string("threelc: ") + source->rank + " is set but " + size_name + " is not");
  }
  options.size = static_cast<int>(integer_of(size_name, 1, kMaxRanks));
  options.rank = static_cast<int>(integer_of(source->rank, 0, kMaxRanks - 1));
  if (options.rank >= options.size) {
    throw Error(-1, std::string("threelc: ") + source->rank + "=" + std::to_string(options.rank) +
                        " is not below " + size_name + "=" + std::to_string(options.size));
  }
  options.local_rank = static_cast<int>(integer_of(source->local_rank, 0, kMaxRanks - 1));
  options.local_size = slurm ? detail::slurm_local_size()
                             : static_cast<int>(integer_of(source->local_size, 1, kMaxRanks));

  const auto& coordinator_row = detail::setting("THREELC_COORDINATOR");
  if (auto coordinator = config::process_environment(coordinator_row.name)) {
    const auto parsed = config::parse_host_port(*coordinator);
    if (!parsed) detail::refuse(coordinator_row, *coordinator);
    options.coordinator_host = parsed->host;
    options.coordinator_port = parsed->port;
  } else if (auto master = config::process_environment("MASTER_ADDR")) {
    // torchrun: MASTER_PORT is torch's own TCPStore; the coordinator takes the next port.
    if (!is_set("MASTER_PORT")) {
      throw Error(-1, "threelc: MASTER_ADDR is set but MASTER_PORT is not");
    }
    options.coordinator_host = *master;
    options.coordinator_port = static_cast<uint16_t>(integer_of("MASTER_PORT", 1, 65534) + 1);
  } else if (options.size > 1) {
    options.wireup = detail::launcher_wireup(source->launcher, options.size);
  }
  options.secret = detail::text_of(detail::setting("THREELC_SECRET"));
  options.listen_host = detail::text_of(detail::setting("THREELC_IFACE"));
  const auto& transport_row = detail::setting("THREELC_TRANSPORT");
  const std::string transport = detail::text_of(transport_row);
  const auto choice = config::parse_choice(transport, {"tcp", "ucx"});
  if (!choice) detail::refuse(transport_row, transport);
  options.transport = *choice == 0 ? "tcp" : "ucx";
  options.start_timeout = detail::seconds_of("THREELC_START_TIMEOUT");
  options.timeout = detail::seconds_of("THREELC_TIMEOUT");
  const auto& max_row = detail::setting("THREELC_MAX_MESSAGE_BYTES");
  const std::string max_text = detail::text_of(max_row);
  const auto max_bytes = config::parse_bytes(max_text, uint64_t{1} << 48);
  if (!max_bytes) detail::refuse(max_row, max_text);
  options.max_message_bytes = static_cast<size_t>(*max_bytes);
  const auto& debug_row = detail::setting("THREELC_TRANSPORT_DEBUG");
  const std::string debug = detail::text_of(debug_row);
  const auto flag = config::parse_flag(debug);
  if (!flag) detail::refuse(debug_row, debug);
  options.debug = *flag;
  return options;
}

namespace detail {

std::string ucx_variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace detail

}  // namespace threelc::transport
