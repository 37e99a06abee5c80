#include "observe/stall_inspector.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace threelc::engine {

std::string format_seconds(StallInspector::Clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(duration).count());
  return text;
}

std::string compact_ranks(std::span<const int> ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string ranks_text(std::span<const int> ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + compact_ranks(ranks);
}

StallInspector::StallInspector(Clock::duration warn_after, int size, size_t max_named)
    : warn_after_(warn_after), size_(size), max_named_(max_named) {
  if (size < 1) throw std::invalid_argument("StallInspector: size must be at least 1");
}

void StallInspector::submitted(const std::string& name, int rank, Clock::time_point now,
                               int32_t process_set, std::span<const int32_t> members) {
  if (rank < 0 || rank >= size_) {
    throw std::invalid_argument("StallInspector: rank " + std::to_string(rank) +
                                " is outside [0, " + std::to_string(size_) + ")");
  }
  if (!enabled()) return;
  auto [it, inserted] = tensors_.try_emplace({process_set, name});
  Pending& pending = it->second;
  if (inserted) {
    pending.first = now;
    pending.ranks.assign(static_cast<size_t>(size_), false);
    if (members.empty()) {
      for (int r = 0; r < size_; ++r) pending.expected.push_back(r);
    } else {
      pending.expected.assign(members.begin(), members.end());
    }
  }
  if (!pending.ranks[static_cast<size_t>(rank)]) {
    pending.ranks[static_cast<size_t>(rank)] = true;
    ++pending.count;
  }
}

void StallInspector::finished(const std::string& name, int32_t process_set) {
  tensors_.erase({process_set, name});
}

std::vector<std::string> StallInspector::check(Clock::time_point now) {
  std::vector<std::string> warnings;
  if (!enabled()) return warnings;
  // Due tensors, oldest first (then by name: std::map order, kept by the stable sort).
  std::vector<std::pair<const std::pair<int32_t, std::string>*, Pending*>> due;
  for (auto& [key, pending] : tensors_) {
    // complete: the coordinator runs it, nobody missing
    if (pending.count == static_cast<int>(pending.expected.size())) continue;
    if (now - pending.first < warn_after_) continue;
    if (pending.warned && now - pending.last_warning < warn_after_) continue;
    due.emplace_back(&key, &pending);
  }
  std::stable_sort(due.begin(), due.end(),
                   [](const auto& a, const auto& b) { return a.second->first < b.second->first; });
  std::vector<int> present;
  std::vector<int> missing;
  for (size_t i = 0; i < due.size(); ++i) {
    Pending& pending = *due[i].second;
    pending.warned = true;
    pending.last_warning = now;
    if (i >= max_named_) continue;
    present.clear();
    missing.clear();
    for (int rank : pending.expected) {
      (pending.ranks[static_cast<size_t>(rank)] ? present : missing).push_back(rank);
    }
    const auto& [process_set, name] = *due[i].first;
    std::string warning = "stall: tensor '" + name + "'";
    if (process_set != 0) warning += " of process set " + std::to_string(process_set);
    warning += " has waited " + format_seconds(now - pending.first);
    warning += " for " + ranks_text(missing) + " (submitted by " + ranks_text(present);
    warning +=
        "); ranks submitting different tensors, or a rank that stopped submitting, hang the job";
    warnings.push_back(std::move(warning));
  }
  if (due.size() > max_named_) {
    warnings.push_back("stall: " + std::to_string(due.size() - max_named_) +
                       " more tensors have waited on missing ranks for over " +
                       format_seconds(warn_after_));
  }
  return warnings;
}

}  // namespace threelc::engine
