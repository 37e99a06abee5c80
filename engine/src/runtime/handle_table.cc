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

namespace {

int64_t steady_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

int HandleTable::wait(Handle handle, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mutex_);
  const auto it = states_.find(handle);
  if (it == states_.end()) return THREELC_EINVAL;
  State& s = *it->second;
  if (s.done) return s.code;
  const bool blocking = !timeout || *timeout >= kBlockingWait;
  if (blocking) blocked_waiters_.fetch_add(1);
  bool finished = true;
  if (timeout) {
    finished = finished_.wait_for(lock, *timeout, [&] { return s.done; });
  } else {
    finished_.wait(lock, [&] { return s.done; });
  }
  if (blocking) {
    if (!finished) last_timed_out_ns_.store(steady_ns(std::chrono::steady_clock::now()));
    blocked_waiters_.fetch_sub(1);
  }
  return finished ? s.code : THREELC_ETIMEOUT;
}

bool HandleTable::blocked(std::chrono::steady_clock::time_point now) const {
  if (blocked_waiters_.load() > 0) return true;
  const int64_t grace = std::chrono::nanoseconds(kBlockingGrace).count();
  return steady_ns(now) - last_timed_out_ns_.load() < grace;
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
