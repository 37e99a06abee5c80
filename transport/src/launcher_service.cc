#include "launcher_service.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace threelc::transport::detail {

namespace {

// Shared by the waiting thread and the calling one: whichever ends last frees it.
struct CallState {
  std::mutex mutex;
  std::condition_variable done;
  std::optional<ServiceReply> reply;
  std::string failure;  // what the call threw
  bool finished = false;
};

}  // namespace

ServiceReply call_before(ServiceClock::time_point deadline, const std::string& what,
                         std::function<ServiceReply()> call) {
  auto state = std::make_shared<CallState>();
  std::thread([state, call = std::move(call)] {
    std::optional<ServiceReply> reply;
    std::string failure;
    try {
      reply = call();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const std::lock_guard lock(state->mutex);
    state->reply = std::move(reply);
    state->failure = std::move(failure);
    state->finished = true;
    state->done.notify_all();
  }).detach();
  std::unique_lock lock(state->mutex);
  if (!state->done.wait_until(lock, deadline, [&] { return state->finished; })) {
    throw Error(-1, what + " did not complete before THREELC_START_TIMEOUT ran out", true);
  }
  if (!state->reply) throw Error(-1, what + " failed: " + state->failure);
  return *state->reply;
}

}  // namespace threelc::transport::detail
