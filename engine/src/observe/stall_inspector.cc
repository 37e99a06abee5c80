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

StallInspector::StallInspector(Clock::duration warn_after, int size, size_t max_named)
    : warn_after_(warn_after), size_(size), max_named_(max_named) {
  if (size < 1) throw std::invalid_argument("StallInspector: size must be at least 1");
}

void StallInspector::submitted(const std::string& name, int rank, Clock::time_point now) {
  if (rank < 0 || rank >= size_) {
    throw std::invalid_argument("StallInspector: rank " + std::to_string(rank) +
                                " is outside [0, " + std::to_string(size_) + ")");
  }
  if (!enabled()) return;
  auto [it, inserted] = tensors_.try_emplace(name);
  Pending& pending = it->second;
  if (inserted) {
    pending.first = now;
    pending.ranks.assign(static_cast<size_t>(size_), false);
  }
  if (!pending.ranks[static_cast<size_t>(rank)]) {
    pending.ranks[static_cast<size_t>(rank)] = true;
    ++pending.count;
  }
}

void StallInspector::finished(const std::string& name) { tensors_.erase(name); }

std::vector<std::string> StallInspector::check(Clock::time_point now) {
  std::vector<std::string> warnings;
  if (!enabled()) return warnings;
  // Due tensors, oldest first (then by name: std::map order, kept by the stable sort).
  std::vector<std::pair<const std::string*, Pending*>> due;
  for (auto& [name, pending] : tensors_) {
    if (pending.count == size_) continue;  // complete: the coordinator runs it, nobody missing
    if (now - pending.first < warn_after_) continue;
    if (pending.warned && now - pending.last_warning < warn_after_) continue;
    due.emplace_back(&name, &pending);
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
    for (int rank = 0; rank < size_; ++rank) {
      (pending.ranks[static_cast<size_t>(rank)] ? present : missing).push_back(rank);
    }
    warnings.push_back(
        "stall: tensor '" + *due[i].first + "' has waited " + format_seconds(now - pending.first) +
        " for rank" + (missing.size() == 1 ? " " : "s ") + compact_ranks(missing) +
        " (submitted by rank" + (present.size() == 1 ? " " : "s ") + compact_ranks(present) +
        "); ranks submitting different tensors, or a rank that stopped "
        "submitting, hang the job");
  }
  if (due.size() > max_named_) {
    warnings.push_back("stall: " + std::to_string(due.size() - max_named_) +
                       " more tensors have waited on missing ranks for over " +
                       format_seconds(warn_after_));
  }
  return warnings;
}

}  // namespace threelc::engine
