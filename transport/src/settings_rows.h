// The single table of environment variables the transport reads: each row's documentation (the
// docs' tables are generated from it) and its parse. Its parts are read in steps of their own
// (settings.cc): the identity of whichever launcher started the process, the coordinator (or the
// launcher's wire-up service), then the fixed rows, all read one way (read_rows). A step names its
// rows with row("NAME"), found at compile time: a name the table lacks does not compile.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "threelc/settings/row.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// --- vocabulary ------------------------------------------------------------------------------

// What the rows write: the options, and what the srun rows give the local size from.
struct Reading {
  explicit Reading(Options& into) : options(into) {}
  Options& options;
  uint64_t slurm_node = 0;     // SLURM_NODEID
  std::string tasks_per_node;  // the first of srun's tasks-per-node lists that is set
};

using Row = settings::Row<Reading>;
using settings::Type;

inline constexpr uint64_t kMaxRanks = 1 << 20;
inline constexpr settings::Range kTimeoutSeconds{.low = 0, .high = 1e7, .low_open = true};
inline constexpr const char* kRankAccepted = "an integer from 0 to 1048575";
inline constexpr const char* kSizeAccepted = "an integer from 1 to 1048576";
inline constexpr const char* kSlurmList = "Slurm's list: `4`, `2(x3),1`";
inline constexpr const char* kTimeoutAccepted =
    "a number of seconds > 0 and <= 10000000 (fractions allowed)";

// The parses the launchers' identity rows share.
inline bool parse_rank(std::string_view v, Reading& r) {
  return settings::assign(r.options.rank, settings::parse_integer(v, kMaxRanks - 1));
}
inline bool parse_size(std::string_view v, Reading& r) {
  return settings::assign(r.options.size, settings::parse_integer(v, 1, kMaxRanks));
}
inline bool parse_local_rank(std::string_view v, Reading& r) {
  return settings::assign(r.options.local_rank, settings::parse_integer(v, kMaxRanks - 1));
}
inline bool parse_local_size(std::string_view v, Reading& r) {
  return settings::assign(r.options.local_size, settings::parse_integer(v, 1, kMaxRanks));
}
inline bool parse_tasks_list(std::string_view v, Reading& r) {
  return settings::assign_text(r.tasks_per_node, v);
}

// --- the table, in its parts -----------------------------------------------------------------

// threelcrun's identity (the defaults of a single rank).
inline constexpr std::array kIdentityRows = {
    Row{{"THREELC_RANK", Type::kInteger, "0", "an integer from 0 to 1048575, below THREELC_SIZE",
         "this process's rank in the job (threelcrun sets it)", ""},
        parse_rank},
    Row{{"THREELC_SIZE", Type::kInteger, "1", kSizeAccepted, "number of ranks in the job", ""},
        parse_size},
    Row{{"THREELC_LOCAL_RANK", Type::kInteger, "0", kRankAccepted,
         "rank among the processes on this host", ""},
        parse_local_rank},
    Row{{"THREELC_LOCAL_SIZE", Type::kInteger, "1", kSizeAccepted, "number of ranks on this host",
         ""},
        parse_local_size},
};

inline constexpr std::array kCoordinatorRows = {
    Row{{"THREELC_COORDINATOR", Type::kHostPort, "",
         "host:port or [v6-address]:port, port 1 to 65535",
         "`host:port` of rank 0's control listener (rendezvous); when size > 1, threelcrun sets "
         "it, mpirun's and srun's PMIx or PMI-2 carry it, else torchrun's "
         "`MASTER_ADDR`/`MASTER_PORT` give it, else it is required",
         "`host:port` of rank 0's control listener; when size > 1 and it is unset: under torchrun "
         "`threelc.torch` sets it (else it is `MASTER_ADDR:(MASTER_PORT+1)`); under mpirun or "
         "srun rank 0 publishes it through the launcher's PMIx or PMI-2 (`PMIX_NAMESPACE`, "
         "`PMI_FD`); elsewhere it is required"},
        [](std::string_view v, Reading& r) {
          const auto parsed = settings::parse_host_port(v);
          if (!parsed) return false;
          r.options.coordinator_host = parsed->host;
          r.options.coordinator_port = parsed->port;
          return true;
        }},
};

// Read the same way under every launcher.
inline constexpr std::array kFixedRows = {
    Row{{"THREELC_SECRET", Type::kText, "", "any text",
         "job secret that authenticates every connection; when size > 1, threelcrun makes a "
         "fresh one, and so does rank 0 under mpirun or srun without `THREELC_COORDINATOR` (set "
         "both or neither)",
         ""},
        [](std::string_view v, Reading& r) { return settings::assign_text(r.options.secret, v); }},
    Row{{"THREELC_IFACE", Type::kText, "", "an interface name or an address",
         "interface name (`eth0`) or address the data listener binds to, and with `ucx` UCX's "
         "network device unless `UCX_NET_DEVICES` is set; unset: the local address of the "
         "connection to the coordinator",
         "interface name (`eth0`) or address the data listener binds to; unset: the local "
         "address of the connection to the coordinator. With `ucx`, the interface of UCX's "
         "network traffic: unless `UCX_NET_DEVICES` is set, UCX's devices become that interface "
         "plus every RDMA port of the host (InfiniBand and RoCE stay in use)"},
        [](std::string_view v, Reading& r) {
          return settings::assign_text(r.options.listen_host, v);
        }},
    Row{{"THREELC_TRANSPORT", Type::kChoice, "tcp", "tcp or ucx",
         "`tcp`, or `ucx`: the data channels over UCX (needs a build with libucx-dev)",
         "`tcp`, or `ucx`: the data channels over UCX, the rendezvous and the control channels "
         "still over the authenticated TCP connections. A build made without UCX (libucx-dev "
         "absent when CMake ran) refuses `ucx` with an error saying so"},
        [](std::string_view v, Reading& r) {
          return settings::assign(r.options.transport, settings::parse_choice_value<const char*>(
                                                           v, {{"tcp", "tcp"}, {"ucx", "ucx"}}));
        }},
    Row{{"THREELC_START_TIMEOUT", Type::kSeconds, "60", kTimeoutAccepted,
         "seconds the rendezvous may take; then an error naming the missing ranks", ""},
        [](std::string_view v, Reading& r) {
          return settings::assign(r.options.start_timeout,
                                  settings::parse_seconds(v, kTimeoutSeconds));
        }},
    Row{{"THREELC_TIMEOUT", Type::kSeconds, "30", kTimeoutAccepted,
         "seconds any other wait (a send, a receive) may take; then an error naming the peer",
         "seconds any other wait (a send, a receive) may take; then an error naming the peer. A "
         "quarter of it (at most 3 s) before then, the wait asks the peer what it waits for: a "
         "peer that waits for another rank is not blamed but waited for, up to three times "
         "`THREELC_TIMEOUT` in all (docs/RELIABILITY.md, \"Whom a timeout blames\"). The "
         "engine's deadlock detection has its own, `THREELC_DEADLOCK_TIMEOUT`"},
        [](std::string_view v, Reading& r) {
          return settings::assign(r.options.timeout, settings::parse_seconds(v, kTimeoutSeconds));
        }},
    Row{{"THREELC_MAX_MESSAGE_BYTES", Type::kBytes, "2147483648",
         "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), up to 2^48",
         "hard limit on one frame's length field", ""},
        [](std::string_view v, Reading& r) {
          return settings::assign(r.options.max_message_bytes,
                                  settings::parse_bytes(v, uint64_t{1} << 48));
        }},
    Row{{"THREELC_TRANSPORT_DEBUG", Type::kFlag, "0", "0 or 1",
         "1: log listener addresses and accepted connections to stderr (with `ucx`, each "
         "endpoint's transports too)",
         ""},
        [](std::string_view v, Reading& r) {
          return settings::assign(r.options.debug, settings::parse_flag(v));
        }},
};

// The other launchers' variables: the identity when THREELC_RANK is not set (in this order), the
// wire-up service when THREELC_COORDINATOR is unset and the job has ranks. A row without a
// parse is only looked at for whether it is set.
inline constexpr std::array kLauncherRows = {
    Row{{"OMPI_COMM_WORLD_RANK", Type::kInteger, "", kRankAccepted,
         "mpirun: the rank (with `OMPI_COMM_WORLD_SIZE`, `_LOCAL_RANK`, `_LOCAL_SIZE`)", ""},
        parse_rank},
    Row{{"OMPI_COMM_WORLD_SIZE", Type::kInteger, "", kSizeAccepted, "mpirun: the size", ""},
        parse_size},
    Row{{"OMPI_COMM_WORLD_LOCAL_RANK", Type::kInteger, "0", kRankAccepted, "mpirun: the local rank",
         ""},
        parse_local_rank},
    Row{{"OMPI_COMM_WORLD_LOCAL_SIZE", Type::kInteger, "1", kSizeAccepted, "mpirun: the local size",
         ""},
        parse_local_size},
    Row{{"SLURM_PROCID", Type::kInteger, "", kRankAccepted, "srun: the rank", ""}, parse_rank},
    Row{{"SLURM_STEP_NUM_TASKS", Type::kInteger, "", kSizeAccepted,
         "srun: the size (the job step's tasks)", ""},
        parse_size},
    Row{{"SLURM_NTASKS", Type::kInteger, "", kSizeAccepted,
         "srun: the size when `SLURM_STEP_NUM_TASKS` is unset", ""},
        parse_size},
    Row{{"SLURM_LOCALID", Type::kInteger, "0", kRankAccepted, "srun: the local rank", ""},
        parse_local_rank},
    Row{{"SLURM_STEP_ID", Type::kText, "", "set by srun",
         "srun: set in a job step's tasks; unset in a batch script itself, whose one process is "
         "not a job of `SLURM_NTASKS` ranks (the error says to start the ranks with srun)",
         ""}},
    Row{{"SLURM_NODEID", Type::kInteger, "0", kRankAccepted,
         "srun: this node's index in the step, for the tasks-per-node lists", ""},
        [](std::string_view v, Reading& r) {
          return settings::assign(r.slurm_node, settings::parse_integer(v, kMaxRanks - 1));
        }},
    Row{{"SLURM_STEP_TASKS_PER_NODE", Type::kText, "", kSlurmList,
         "srun: the local size, the list's entry at `SLURM_NODEID`", ""},
        parse_tasks_list},
    Row{{"SLURM_TASKS_PER_NODE", Type::kText, "", kSlurmList,
         "srun: the local size when `SLURM_STEP_TASKS_PER_NODE` is unset", ""},
        parse_tasks_list},
    Row{{"SLURM_NTASKS_PER_NODE", Type::kText, "1", kSlurmList,
         "srun: the local size when neither list above is set", ""},
        parse_tasks_list},
    Row{{"PMIX_NAMESPACE", Type::kText, "", "set by a PMIx server",
         "mpirun, `srun --mpi=pmix`: with `PMIX_RANK`, the coordinator and the secret pass "
         "through the launcher's PMIx (libpmix.so.2, loaded then)",
         ""}},
    Row{{"PMIX_RANK", Type::kInteger, "", kRankAccepted,
         "PMIx's rank of this process (it must equal the launcher's rank)", ""}},
    Row{{"PMI_FD", Type::kText, "", "set by srun --mpi=pmi2",
         "`srun --mpi=pmi2`: with `PMI_RANK`, the coordinator and the secret pass through "
         "Slurm's PMI-2 (libpmi2.so.0, loaded then)",
         ""}},
    Row{{"PMI_RANK", Type::kInteger, "", kRankAccepted,
         "PMI-2's rank of this process (it must equal the launcher's rank)", ""}},
    Row{{"RANK", Type::kInteger, "", kRankAccepted, "torchrun: the rank", ""}, parse_rank},
    Row{{"WORLD_SIZE", Type::kInteger, "", kSizeAccepted, "torchrun: the size", ""}, parse_size},
    Row{{"LOCAL_RANK", Type::kInteger, "0", kRankAccepted, "torchrun: the local rank", ""},
        parse_local_rank},
    Row{{"LOCAL_WORLD_SIZE", Type::kInteger, "1", kSizeAccepted, "torchrun: the local size", ""},
        parse_local_size},
    Row{{"MASTER_ADDR", Type::kText, "", "a host name or address",
         "torchrun: the coordinator's host when `THREELC_COORDINATOR` is unset", ""},
        [](std::string_view v, Reading& r) {
          return settings::assign_text(r.options.coordinator_host, v);
        }},
    Row{{"MASTER_PORT", Type::kInteger, "", "an integer from 1 to 65534",
         "torchrun: the coordinator listens on `MASTER_PORT` + 1 (`MASTER_PORT` is torch's own "
         "store)",
         ""},
        [](std::string_view v, Reading& r) {
          // torch's TCPStore has MASTER_PORT; the coordinator takes the next port.
          const auto port = settings::parse_integer(v, 1, 65534);
          if (!port) return false;
          r.options.coordinator_port = static_cast<uint16_t>(*port + 1);
          return true;
        }},
};

// Every row, in the order the docs list them.
inline constexpr auto kRows =
    settings::join(kIdentityRows, kCoordinatorRows, kFixedRows, kLauncherRows);
inline constexpr auto kDocRows = settings::documentation(kRows);

// The row named `name`; a name the table lacks does not compile.
consteval const Row* row(std::string_view name) { return &kRows[settings::index_of(kRows, name)]; }

}  // namespace threelc::transport::detail
