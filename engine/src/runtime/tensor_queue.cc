#include "runtime/tensor_queue.h"

#include "runtime/engine_error.h"
#include "threelc/threelc.h"

namespace threelc::engine {

void TensorQueue::submit(Operation operation) {
  std::lock_guard lock(mutex_);
  const std::string& name = operation.request.name;
  if (in_flight_.count(name) != 0) {
    throw EngineError(THREELC_EDUPLICATE, "a " + std::string(op_kind_name(operation.request.kind)) +
                                              " of tensor '" + name +
                                              "' is already in flight on this rank");
  }
  new_.push_back(operation.request);
  in_flight_.emplace(name, std::move(operation));
}

std::vector<OpRequest> TensorQueue::take_new() {
  std::lock_guard lock(mutex_);
  std::vector<OpRequest> out;
  out.swap(new_);
  return out;
}

std::optional<Operation> TensorQueue::take(const std::string& name) {
  std::lock_guard lock(mutex_);
  const auto it = in_flight_.find(name);
  if (it == in_flight_.end() || !it->second) return std::nullopt;
  std::optional<Operation> out = std::move(it->second);
  it->second.reset();
  return out;
}

void TensorQueue::finish(const std::string& name) {
  std::lock_guard lock(mutex_);
  in_flight_.erase(name);
}

std::vector<Operation> TensorQueue::take_all() {
  std::lock_guard lock(mutex_);
  std::vector<Operation> out;
  for (auto& [name, op] : in_flight_) {
    if (op) out.push_back(std::move(*op));
  }
  in_flight_.clear();
  new_.clear();
  return out;
}

}  // namespace threelc::engine
