// connect() and Request: the parts of transport.h that no single implementation owns.
#include "threelc/transport/transport.h"

#include <cstdio>

#include "request.h"
#include "tcp.h"
#ifdef THREELC_HAVE_UCX
#include "ucx.h"
#endif

namespace threelc::transport {

bool Request::done() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

size_t Request::wait() { return wait(std::chrono::milliseconds(0)); }

size_t Request::wait(std::chrono::milliseconds extra) {
  if (!state_) return 0;
  auto& state = *state_;
  const auto timeout = state.timeout + extra;
  std::unique_lock lock(state.mutex);
  if (!state.cv.wait_for(lock, timeout, [&] { return state.done; })) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g s", static_cast<double>(timeout.count()) / 1e3);
    const std::string message = "threelc: timed out after " + std::string(seconds) +
                                " waiting for the " + state.what +
                                " (THREELC_TIMEOUT); the connection is closed";
    lock.unlock();
    // Failing the connection fails this request too and so releases the caller's buffer.
    if (state.on_timeout) state.on_timeout(message);
    lock.lock();
    state.cv.wait_for(lock, std::chrono::seconds(5), [&] { return state.done; });
    if (!state.done || !state.error.empty()) {
      throw Error(state.peer, state.error.empty() ? message : state.error, /*timed_out=*/true);
    }
  }
  if (!state.error.empty()) throw Error(state.peer, state.error);
  return state.bytes;
}

std::unique_ptr<Context> connect(const Options& options) {
  const std::string who = "threelc rank " + std::to_string(options.rank) + ": ";
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    throw Error(-1, who + "rank " + std::to_string(options.rank) + " is not in a job of " +
                        std::to_string(options.size) + " ranks");
  }
  if (options.size > 1 && options.secret.empty()) {
    throw Error(-1, who + "THREELC_SECRET is empty: every connection of a job of " +
                        std::to_string(options.size) + " ranks is authenticated with it");
  }
  if (options.transport == "tcp") return detail::connect_tcp(options);
  if (options.transport == "ucx") {
#ifdef THREELC_HAVE_UCX
    return detail::connect_ucx(options);
#else
    throw Error(-1, who +
                        "THREELC_TRANSPORT=ucx: this build of threelc has no UCX transport: UCX "
                        "(libucx-dev) was not found when it was configured; install it "
                        "(tools/setup.sh does) and rebuild, or use THREELC_TRANSPORT=tcp");
#endif
  }
  throw Error(-1, who + "THREELC_TRANSPORT='" + options.transport + "' is not tcp or ucx");
}

}  // namespace threelc::transport
