#include "slurm_tasks.h"

#include "threelc/settings/setting.h"

namespace threelc::transport::detail {

namespace {

constexpr uint64_t kMaxCount = 1 << 20;

// A count "N" or a run "N(xR)" with N and R from 1 to 2^20.
struct Run {
  long long tasks = 0;
  long long nodes = 1;
};

std::optional<Run> parse_run(std::string_view item) {
  Run run;
  std::string_view count = item;
  if (const auto open = item.find('('); open != std::string_view::npos) {
    if (item.size() < open + 4 || item.substr(open, 2) != "(x" || item.back() != ')') {
      return std::nullopt;
    }
    const auto repeat = ::threelc::settings::parse_integer(
        item.substr(open + 2, item.size() - open - 3), kMaxCount);
    if (!repeat || *repeat < 1) return std::nullopt;
    run.nodes = static_cast<long long>(*repeat);
    count = item.substr(0, open);
  }
  const auto tasks = ::threelc::settings::parse_integer(count, kMaxCount);
  if (!tasks || *tasks < 1) return std::nullopt;
  run.tasks = static_cast<long long>(*tasks);
  return run;
}

}  // namespace

std::optional<long long> slurm_tasks_on_node(std::string_view list, long long node) {
  if (node < 0 || list.empty()) return std::nullopt;
  long long first = 0;  // the first node of the current run
  std::optional<long long> found;
  for (;;) {
    const auto comma = list.find(',');
    const auto run = parse_run(list.substr(0, comma));
    if (!run) return std::nullopt;  // the whole list is checked, not only up to the node
    if (!found && node < first + run->nodes) found = run->tasks;
    first += run->nodes;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return found;
}

}  // namespace threelc::transport::detail
