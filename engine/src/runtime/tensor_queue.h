// Operations submitted by framework threads and not finished yet, by name. Framework threads
// submit; the background thread takes the new requests once per cycle, takes an operation when
// its response runs, and finishes it. Thread-safe.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/operation.h"

namespace threelc::engine {

class TensorQueue {
 public:
  // Throws EngineError(THREELC_EDUPLICATE) when an operation of that name is in flight.
  void submit(Operation operation);
  // Requests submitted since the last call, in submission order.
  std::vector<OpRequest> take_new();
  // The operation of `name` (it stays in flight until finish); nullopt if none.
  std::optional<Operation> take(const std::string& name);
  void finish(const std::string& name);
  // Every operation still in flight (for failing them at shutdown); empties the queue.
  std::vector<Operation> take_all();

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::optional<Operation>> in_flight_;
  std::vector<OpRequest> new_;
};

}  // namespace threelc::engine
