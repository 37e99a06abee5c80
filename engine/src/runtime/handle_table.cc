#include "runtime/handle_table.h"

#include "threelc/threelc.h"

namespace threelc::engine {

Handle HandleTable::create() {
  std::lock_guard lock(mutex_);
  const Handle h = next_++;
  states_.emplace(h, std::make_unique<State>());
  return h;
}

void HandleTable::complete(Handle handle, int code, std::string message, OpResult result) {
  {
    std::lock_guard lock(mutex_);
    const auto it = states_.find(handle);
    if (it == states_.end() || it->second->done) return;
    State& s = *it->second;
    s.code = code;
    s.message = std::move(message);
    s.result = std::move(result);
    s.done = true;
  }
  finished_.notify_all();
}

int HandleTable::poll(Handle handle) const {
  std::lock_guard lock(mutex_);
  const auto it = states_.find(handle);
  if (it == states_.end()) return THREELC_EINVAL;
  return it->second->done ? 1 : 0;
}

int HandleTable::wait(Handle handle, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mutex_);
  const auto it = states_.find(handle);
  if (it == states_.end()) return THREELC_EINVAL;
  State& s = *it->second;
  if (timeout) {
    if (!finished_.wait_for(lock, *timeout, [&] { return s.done; })) return THREELC_ETIMEOUT;
  } else {
    finished_.wait(lock, [&] { return s.done; });
  }
  return s.code;
}

const std::string* HandleTable::error(Handle handle) const {
  std::lock_guard lock(mutex_);
  const auto it = states_.find(handle);
  return it == states_.end() ? nullptr : &it->second->message;
}

const OpResult* HandleTable::result(Handle handle) const {
  std::lock_guard lock(mutex_);
  const auto it = states_.find(handle);
  return it == states_.end() || !it->second->done ? nullptr : &it->second->result;
}

int HandleTable::release(Handle handle) {
  std::lock_guard lock(mutex_);
  return states_.erase(handle) == 1 ? THREELC_OK : THREELC_EINVAL;
}

size_t HandleTable::pending() const {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& [h, s] : states_) n += s->done ? 0 : 1;
  return n;
}

}  // namespace threelc::engine
