#include "runtime/tensor_queue.h"

#include "engine_error.h"
#include "threelc/threelc.h"

namespace threelc::engine {

void TensorQueue::submit(Operation operation) {
  std::unique_lock lock(mutex_);
  OpKey key = key_of(operation.request);
  if (in_flight_.count(key) != 0) {
    throw EngineError(THREELC_EDUPLICATE, "a " + std::string(op_kind_name(operation.request.kind)) +
                                              " of tensor " + quoted(key) +
                                              " is already in flight on this rank");
  }
  new_.push_back(operation.request);
  in_flight_[std::move(key)].operation.emplace(std::move(operation));
  lock.unlock();
  submitted_.notify_all();
}

std::vector<OpRequest> TensorQueue::take_new() {
  std::lock_guard lock(mutex_);
  std::vector<OpRequest> out;
  out.swap(new_);
  flush_ = false;
  for (const OpRequest& r : out) {
    if (const auto it = in_flight_.find(key_of(r)); it != in_flight_.end()) it->second.sent = true;
  }
  return out;
}

std::optional<Operation> TensorQueue::take(const OpKey& key) { return take_if(key, false); }

std::optional<Operation> TensorQueue::take_sent(const OpKey& key) { return take_if(key, true); }

std::optional<Operation> TensorQueue::take_if(const OpKey& key, bool sent_only) {
  std::lock_guard lock(mutex_);
  const auto it = in_flight_.find(key);
  if (it == in_flight_.end() || !it->second.operation) return std::nullopt;
  if (sent_only && !it->second.sent) return std::nullopt;
  std::optional<Operation> out = std::move(it->second.operation);
  it->second.operation.reset();
  return out;
}

void TensorQueue::finish(const OpKey& key) {
  std::lock_guard lock(mutex_);
  in_flight_.erase(key);
}

std::vector<Operation> TensorQueue::take_all() {
  std::lock_guard lock(mutex_);
  std::vector<Operation> out;
  for (auto& [key, entry] : in_flight_) {
    if (entry.operation) out.push_back(std::move(*entry.operation));
  }
  in_flight_.clear();
  new_.clear();
  return out;
}

void TensorQueue::wait_while_idle(std::chrono::steady_clock::time_point deadline,
                                  const std::atomic<bool>& stop) {
  std::unique_lock lock(mutex_);
  submitted_.wait_until(lock, deadline, [&] { return !in_flight_.empty() || stop.load(); });
}

void TensorQueue::wait_for_cycle(std::chrono::steady_clock::time_point deadline,
                                 const std::atomic<bool>& stop) {
  std::unique_lock lock(mutex_);
  submitted_.wait_until(lock, deadline, [&] { return flush_ || stop.load(); });
}

void TensorQueue::flush() {
  {
    std::lock_guard lock(mutex_);
    flush_ = true;
  }
  submitted_.notify_all();
}

void TensorQueue::wake() {
  // Under the mutex: a waiter between testing `stop` and sleeping cannot miss it.
  { std::lock_guard lock(mutex_); }
  submitted_.notify_all();
}

}  // namespace threelc::engine
