// THREELC_STALL_CHECK_TIME: the coordinator (rank 0) tells it which rank submitted which tensor
// and when a tensor was dispatched; check() returns warnings for tensors that some ranks have
// submitted and others have not for longer than the limit. Such a tensor never runs (every rank
// must submit it), so the job hangs: ranks submitting different tensors, or one rank that stopped
// submitting. Horovod users know the warning.
//
// Deterministic and passive: no threads, no clock reads (the caller passes the time).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace threelc::engine {

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;

  // warn_after zero: disabled (nothing is tracked, check() returns nothing). At most
  // `max_named` tensors are named per check; the rest are summed up in one more line.
  StallInspector(Clock::duration warn_after, int size, size_t max_named = 20);

  // `rank` submitted `name` of process set `process_set` (again: no change); `members` are the
  // ranks expected to submit it (ascending; empty: every rank, the global set). Throws
  // std::invalid_argument for a rank outside [0, size).
  void submitted(const std::string& name, int rank, Clock::time_point now, int32_t process_set = 0,
                 std::span<const int32_t> members = {});
  // The tensor ran (or failed): forget it. Unknown names are ignored.
  void finished(const std::string& name, int32_t process_set = 0);

  // Warnings, oldest tensor first, for every tensor waiting on missing ranks for warn_after or
  // more since its first submission and not warned about in the last warn_after:
  //   tensor 'grad/fc1' waited 61.0 s for ranks 1, 4-7 (submitted by ranks 0, 2-3) ...
  // (a tensor of another process set than 0: "tensor 'grad/fc1' of process set 2 ...", its
  // missing ranks among the set's members).
  std::vector<std::string> check(Clock::time_point now);

  size_t pending() const { return tensors_.size(); }
  bool enabled() const { return warn_after_ > Clock::duration::zero(); }

 private:
  struct Pending {
    Clock::time_point first;
    std::vector<bool> ranks;    // submitted
    std::vector<int> expected;  // the ranks that must submit it
    int count = 0;
    bool warned = false;
    Clock::time_point last_warning;
  };

  Clock::duration warn_after_;
  int size_;
  size_t max_named_;
  std::map<std::pair<int32_t, std::string>, Pending> tensors_;  // by (process set, name)
};

// A duration as stall messages write it: "61.0 s".
std::string format_seconds(StallInspector::Clock::duration duration);

// Ascending ranks in compact form: {0, 1, 2, 3, 5, 7, 8} -> "0-3, 5, 7-8". Needs sorted input.
std::string compact_ranks(std::span<const int> ranks);
// "rank 3", "ranks 0-2, 5": how every message of rank 0's names a list of ranks (compact_ranks).
std::string ranks_text(std::span<const int> ranks);

}  // namespace threelc::engine
