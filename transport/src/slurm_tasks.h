// Slurm's tasks-per-node lists (SLURM_STEP_TASKS_PER_NODE, SLURM_TASKS_PER_NODE): "2(x3),1"
// means 2 tasks on each of the first three nodes and 1 on the fourth.
#pragma once

#include <optional>
#include <string_view>

namespace threelc::transport::detail {

// The number of tasks on node `node` (0-based, as SLURM_NODEID counts), or nullopt when `list`
// is malformed or names fewer nodes.
std::optional<long long> slurm_tasks_on_node(std::string_view list, long long node);

}  // namespace threelc::transport::detail
