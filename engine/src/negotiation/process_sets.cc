#include "negotiation/process_sets.h"

#include <algorithm>
#include <stdexcept>

namespace threelc::engine {

ProcessSetTable::ProcessSetTable(int job_size) : job_size_(job_size) {
  std::vector<int32_t> all(static_cast<size_t>(std::max(job_size, 0)));
  for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int32_t>(r);
  sets_.emplace(0, std::move(all));
}

void ProcessSetTable::add(int32_t id, std::vector<int32_t> members) {
  const std::string wrong = check_members(members, job_size_);
  std::lock_guard lock(mutex_);
  if (id <= 0 || sets_.count(id) != 0 || !wrong.empty()) {
    throw std::invalid_argument("ProcessSetTable: cannot add process set " + std::to_string(id) +
                                (wrong.empty() ? ": the id is taken" : ": " + wrong));
  }
  sets_.emplace(id, std::move(members));
  next_id_ = std::max(next_id_, id + 1);
}

bool ProcessSetTable::remove(int32_t id) {
  std::lock_guard lock(mutex_);
  return id > 0 && sets_.erase(id) == 1;
}

std::optional<std::vector<int32_t>> ProcessSetTable::members(int32_t id) const {
  std::lock_guard lock(mutex_);
  const auto it = sets_.find(id);
  if (it == sets_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> ProcessSetTable::find(const std::vector<int32_t>& members) const {
  std::lock_guard lock(mutex_);
  for (const auto& [id, set] : sets_) {
    if (set == members) return id;
  }
  return std::nullopt;
}

std::vector<int32_t> ProcessSetTable::ids() const {
  std::lock_guard lock(mutex_);
  std::vector<int32_t> out;
  out.reserve(sets_.size());
  for (const auto& [id, set] : sets_) out.push_back(id);
  return out;
}

int32_t ProcessSetTable::next_id() const {
  std::lock_guard lock(mutex_);
  return next_id_;
}

std::string ProcessSetTable::unknown(int32_t id) const {
  std::lock_guard lock(mutex_);
  const std::string set = "process set " + std::to_string(id);
  if (id > 0 && id < next_id_ && sets_.count(id) == 0) return set + " was removed";
  return set + " does not exist";
}

std::string check_members(const std::vector<int32_t>& members, int job_size) {
  if (members.empty()) return "a process set needs at least one rank";
  for (size_t i = 0; i < members.size(); ++i) {
    const int32_t r = members[i];
    if (r < 0 || r >= job_size) {
      return "rank " + std::to_string(r) + " is outside 0.." + std::to_string(job_size - 1);
    }
    if (i > 0 && r <= members[i - 1]) {
      return r == members[i - 1] ? "rank " + std::to_string(r) + " is listed twice"
                                 : "ranks are not in ascending order";
    }
  }
  return "";
}

int member_index(std::span<const int32_t> members, int rank) {
  const auto it = std::lower_bound(members.begin(), members.end(), rank);
  if (it == members.end() || *it != rank) return -1;
  return static_cast<int>(it - members.begin());
}

std::string members_text(const std::vector<int32_t>& members) {
  std::string out = "[";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(members[i]);
  }
  return out + "]";
}

}  // namespace threelc::engine
