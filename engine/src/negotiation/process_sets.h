// Process sets (Horovod's): subsets of the job's ranks whose members run collectives among
// themselves. Set 0 is every rank of the job. Others are added and removed by operations
// negotiated among every rank (each rank calls them in the same order); the coordinator numbers
// them 1, 2, ... and never reuses an id. The coordinator keeps one table (what it accepts); every
// rank keeps its own, updated as it executes the add and remove responses, which the C ABI
// reads (submission checks, threelc_process_set_*). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace threelc::engine {

class ProcessSetTable {
 public:
  // Registers set 0: ranks 0 .. job_size - 1.
  explicit ProcessSetTable(int job_size);

  int job_size() const { return job_size_; }
  // Registers set `id` (> 0, not registered before) with ascending, distinct `members`.
  // Throws std::invalid_argument otherwise (a caller's bug: members are checked first).
  void add(int32_t id, std::vector<int32_t> members);
  // Forgets set `id` (> 0); false when it is not registered.
  bool remove(int32_t id);
  // The members of set `id`, ascending; nullopt for an unknown or removed id.
  std::optional<std::vector<int32_t>> members(int32_t id) const;
  // The id of the registered set with exactly `members` (set 0 included), if any.
  std::optional<int32_t> find(const std::vector<int32_t>& members) const;
  // Every registered id, ascending (0 first).
  std::vector<int32_t> ids() const;
  // The lowest id never registered here: what the coordinator assigns next.
  int32_t next_id() const;
  // Why `id` names no set: "process set 3 was removed" or "process set 7 does not exist".
  std::string unknown(int32_t id) const;

 private:
  int job_size_;
  mutable std::mutex mutex_;
  std::map<int32_t, std::vector<int32_t>> sets_;
  int32_t next_id_ = 1;
};

// Empty when `members` are the ascending, distinct ranks of a job of `job_size` (at least one);
// else what is wrong with them, e.g. "rank 4 is outside 0..3".
std::string check_members(const std::vector<int32_t>& members, int job_size);

// The index of job rank `rank` among `members`, or -1.
int member_index(std::span<const int32_t> members, int rank);

// "[0, 2, 3]", for messages.
std::string members_text(const std::vector<int32_t>& members);

}  // namespace threelc::engine
