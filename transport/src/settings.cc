// options_from(): the transport's rows (settings_rows.h) read in their steps, the identity of the
// launcher that started the process, the coordinator or the launcher's wire-up service, the fixed
// rows; and ucx_variable() for UCX's own variables. Nothing else in transport/ calls getenv().
#include "settings.h"

#include <cstdlib>
#include <span>
#include <string>

#include "slurm_tasks.h"

namespace threelc::transport {
namespace detail {
namespace {

// --- vocabulary ------------------------------------------------------------------------------

[[noreturn]] void refuse(const std::string& refusal) { throw Error(-1, "threelc: " + refusal); }

// The variables through one lookup, and what their rows write.
class Variables {
 public:
  Variables(const settings::EnvironmentLookup& lookup, Reading& into)
      : lookup_(lookup), into_(into) {}

  bool is_set(const Row* row) const {
    const auto value = lookup_(row->doc.name);
    return value && !value->empty();
  }
  // The row's value (else its default) into the options; Error with the refusal when malformed.
  void read(const Row* row) const {
    if (auto refused = settings::read_row(*row, lookup_, into_)) refuse(*refused);
  }
  void read_all(std::span<const Row> rows) const {
    if (auto refused = settings::read_rows(rows, lookup_, into_)) refuse(*refused);
  }
  Reading& into() const { return into_; }
  Options& options() const { return into_.options; }

 private:
  const settings::EnvironmentLookup& lookup_;
  Reading& into_;
};

// A launcher's identity variables; the first launcher whose rank variable is set gives them.
struct Launcher {
  const char* name;
  const Row *rank, *size, *local_rank;
  const Row* local_size;  // nullptr: srun's tasks-per-node lists
};

constexpr Launcher kLaunchers[] = {
    {"threelcrun", row("THREELC_RANK"), row("THREELC_SIZE"), row("THREELC_LOCAL_RANK"),
     row("THREELC_LOCAL_SIZE")},
    {"mpirun", row("OMPI_COMM_WORLD_RANK"), row("OMPI_COMM_WORLD_SIZE"),
     row("OMPI_COMM_WORLD_LOCAL_RANK"), row("OMPI_COMM_WORLD_LOCAL_SIZE")},
    {"srun", row("SLURM_PROCID"), row("SLURM_NTASKS"), row("SLURM_LOCALID"), nullptr},
    {"torchrun", row("RANK"), row("WORLD_SIZE"), row("LOCAL_RANK"), row("LOCAL_WORLD_SIZE")},
};

constexpr const Row* kSlurmLists[] = {row("SLURM_STEP_TASKS_PER_NODE"), row("SLURM_TASKS_PER_NODE"),
                                      row("SLURM_NTASKS_PER_NODE")};

// --- steps -----------------------------------------------------------------------------------

// srun's local size: the entry at SLURM_NODEID of the first tasks-per-node list that is set.
void read_slurm_local_size(const Variables& vars) {
  for (const Row* list : kSlurmLists) {
    if (!vars.is_set(list)) continue;
    vars.read(list);
    vars.read(row("SLURM_NODEID"));
    const Reading& reading = vars.into();
    const auto tasks = slurm_tasks_on_node(reading.tasks_per_node, reading.slurm_node);
    if (!tasks) {
      throw Error(-1, "threelc: " + std::string(list->doc.name) + "='" + reading.tasks_per_node +
                          "' is not Slurm's tasks-per-node list (counts from 1 to 1048576, "
                          "'N(xR)' for R nodes of N, separated by commas) with an entry for "
                          "SLURM_NODEID=" +
                          std::to_string(reading.slurm_node));
    }
    vars.options().local_size = static_cast<int>(*tasks);
    return;
  }
  vars.options().local_size = 1;  // no list: this node runs the one task
}

// Rank, size, local rank and local size from the first launcher whose rank variable is set.
const Launcher& read_identity(const Variables& vars) {
  const Launcher* launcher = &kLaunchers[0];
  for (const Launcher& candidate : kLaunchers) {
    if (vars.is_set(candidate.rank)) {
      launcher = &candidate;
      break;
    }
  }
  const bool slurm = launcher->local_size == nullptr;
  const Row* size = slurm && vars.is_set(row("SLURM_STEP_NUM_TASKS")) ? row("SLURM_STEP_NUM_TASKS")
                                                                      : launcher->size;
  if (launcher != &kLaunchers[0] && !vars.is_set(size)) {
    throw Error(-1, std::string("threelc: ") + launcher->rank->doc.name + " is set but " +
                        size->doc.name + " is not");
  }
  vars.read(size);
  vars.read(launcher->rank);
  const Options& options = vars.options();
  if (options.rank >= options.size) {
    throw Error(-1, std::string("threelc: ") + launcher->rank->doc.name + "=" +
                        std::to_string(options.rank) + " is not below " + size->doc.name + "=" +
                        std::to_string(options.size));
  }
  vars.read(launcher->local_rank);
  if (slurm) {
    read_slurm_local_size(vars);
  } else {
    vars.read(launcher->local_size);
  }
  return *launcher;
}

// How the ranks meet when THREELC_COORDINATOR is unset: the launcher's PMIx or PMI-2, or an
// error that says what to set.
std::string launcher_wireup(const Variables& vars, const std::string& launcher, int size) {
  if (vars.is_set(row("THREELC_SECRET"))) {
    throw Error(-1,
                "threelc: THREELC_SECRET is set but THREELC_COORDINATOR is not: set both (the "
                "same on every rank), or neither, and " +
                    launcher + " passes rank 0's address and a fresh secret to every rank itself");
  }
  if (vars.is_set(row("PMIX_NAMESPACE")) && vars.is_set(row("PMIX_RANK"))) return "pmix";
  if (vars.is_set(row("PMI_FD")) && vars.is_set(row("PMI_RANK"))) return "pmi2";
  const std::string set_both =
      "give every rank THREELC_COORDINATOR=<rank 0's host>:<a free port> and one "
      "THREELC_SECRET (export THREELC_SECRET=$(python3 -c 'import secrets; "
      "print(secrets.token_hex(32))'))";
  std::string how;
  if (launcher == "srun" && !vars.is_set(row("SLURM_STEP_ID"))) {
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

// THREELC_COORDINATOR, else torchrun's MASTER_ADDR:(MASTER_PORT + 1), else (a job of ranks) the
// launcher's wire-up service.
void read_coordinator(const Variables& vars, const Launcher& launcher) {
  if (vars.is_set(row("THREELC_COORDINATOR"))) {
    vars.read(row("THREELC_COORDINATOR"));
  } else if (vars.is_set(row("MASTER_ADDR"))) {
    if (!vars.is_set(row("MASTER_PORT"))) {
      throw Error(-1, "threelc: MASTER_ADDR is set but MASTER_PORT is not");
    }
    vars.read(row("MASTER_ADDR"));
    vars.read(row("MASTER_PORT"));
  } else if (vars.options().size > 1) {
    vars.options().wireup = launcher_wireup(vars, launcher.name, vars.options().size);
  }
}

}  // namespace

std::string ucx_variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace detail

// The rows' defaults: they parse (a test reads the rows with nothing set), so nothing is refused.
Options::Options() {
  detail::Reading reading{*this};
  (void)settings::read_rows<detail::Reading>(detail::kIdentityRows, settings::no_variables,
                                             reading);
  (void)settings::read_rows<detail::Reading>(detail::kFixedRows, settings::no_variables, reading);
}

settings::SettingTable transport_settings() { return {"transport", detail::kDocRows}; }

Options options_from(const settings::EnvironmentLookup& lookup) {
  Options options;
  detail::Reading reading{options};
  const detail::Variables vars(lookup, reading);
  const detail::Launcher& launcher = detail::read_identity(vars);
  detail::read_coordinator(vars, launcher);
  vars.read_all(detail::kFixedRows);
  return options;
}

Options options_from_environment() { return options_from(settings::process_environment); }

}  // namespace threelc::transport
