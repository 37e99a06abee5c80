// Handles of submitted operations: framework threads poll and wait on them, the background
// thread completes them. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "element_type.h"
#include "runtime/operation.h"

namespace threelc::engine {

// What an operation produced besides its caller-provided output.
struct OpResult {
  std::vector<std::byte> data;  // allgather, reducescatter, alltoall
  ElementType dtype = ElementType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<int64_t> received_splits;  // alltoall
  int last_joined_rank = -1;             // join
  int32_t process_set = -1;              // add_process_set: the new set's id
};

class HandleTable {
 public:
  Handle create();
  // Finishes the operation (code THREELC_OK or a THREELC_E* code) and wakes its waiters.
  // Completing an unknown or finished handle does nothing.
  void complete(Handle handle, int code, std::string message, OpResult result = {});

  // 1 finished, 0 pending, THREELC_EINVAL unknown.
  int poll(Handle handle) const;
  // The operation's code, THREELC_ETIMEOUT if still pending after `timeout` (nullopt: no
  // limit), THREELC_EINVAL for an unknown handle.
  int wait(Handle handle, std::optional<std::chrono::milliseconds> timeout);
  // Whether a thread is blocked waiting for an operation at `now` (what each rank tells the
  // coordinator's deadlock detection): inside a wait without limit or of at least
  // kBlockingWait, or out of such a wait that timed out less than kBlockingGrace ago (a caller
  // that waits in slices, as the Python binding does, is between two of them). Lock-free.
  bool blocked(std::chrono::steady_clock::time_point now) const;
  static constexpr std::chrono::milliseconds kBlockingWait{10};
  static constexpr std::chrono::milliseconds kBlockingGrace{100};
  // Valid until release; nullptr for an unknown handle.
  const std::string* error(Handle handle) const;
  const OpResult* result(Handle handle) const;
  // THREELC_OK, or THREELC_EINVAL for an unknown handle.
  int release(Handle handle);
  size_t pending() const;

 private:
  struct State {
    bool done = false;
    int code = 0;
    std::string message;
    OpResult result;
  };
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  Handle next_ = 1;
  std::unordered_map<Handle, std::unique_ptr<State>> states_;
  std::atomic<int> blocked_waiters_{0};
  // When the last blocking wait timed out (steady clock, nanoseconds since its epoch).
  std::atomic<int64_t> last_timed_out_ns_{std::numeric_limits<int64_t>::min() / 2};
};

}  // namespace threelc::engine
