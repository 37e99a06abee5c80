// Operations submitted by framework threads and not finished yet, by (process set, name): the
// same name may be in flight in two process sets. Framework threads
// submit; the background thread takes the new requests once per cycle, takes an operation when
// its response runs, and finishes it. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/operation.h"

namespace threelc::engine {

class TensorQueue {
 public:
  // Throws EngineError(THREELC_EDUPLICATE) when an operation of that name is in flight in its
  // process set.
  void submit(Operation operation);
  // Requests submitted since the last call, in submission order.
  std::vector<OpRequest> take_new();
  // The operation of `key` (it stays in flight until finish); nullopt if none.
  std::optional<Operation> take(const OpKey& key);
  // The same, but only once take_new has handed out its request (the coordinator knows of it):
  // an error response for a tensor this rank had not sent (a stall timeout) must not fail an
  // operation of that name submitted since.
  std::optional<Operation> take_sent(const OpKey& key);
  void finish(const OpKey& key);
  // Every operation still in flight (for failing them at shutdown); empties the queue.
  std::vector<Operation> take_all();
  // Blocks while nothing is in flight on this rank (no operation submitted and unfinished),
  // until a submission, `stop` turning true (with wake()), or `deadline`.
  void wait_while_idle(std::chrono::steady_clock::time_point deadline,
                       const std::atomic<bool>& stop);
  // Blocks until `deadline`, a flush() since the last take_new, or `stop` (with wake()).
  void wait_for_cycle(std::chrono::steady_clock::time_point deadline,
                      const std::atomic<bool>& stop);
  // What was submitted is complete for now (a DDP bucket, the gradients a step waits for):
  // the next cycle runs at once instead of at its time.
  void flush();
  // Ends a wait_while_idle or wait_for_cycle early, once its `stop` has been set.
  void wake();

 private:
  struct Entry {
    std::optional<Operation> operation;  // empty once taken
    bool sent = false;                   // its request was handed out by take_new
  };
  std::optional<Operation> take_if(const OpKey& key, bool sent_only);

  std::mutex mutex_;
  std::condition_variable submitted_;
  std::unordered_map<OpKey, Entry, OpKeyHash> in_flight_;
  std::vector<OpRequest> new_;
  bool flush_ = false;  // flush() was called since the last take_new
};

}  // namespace threelc::engine
