// connect() and Request: the parts of transport.h that no single implementation owns.
#include "threelc/transport/transport.h"

#include <cstdio>

#include "launcher_wireup.h"
#include "request.h"
#include "settings.h"
#include "tcp.h"
#ifdef THREELC_HAVE_UCX
#include "rank_prefix.h"
#include "ucx.h"
#endif

namespace threelc::transport {

bool Request::done() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", std::chrono::duration<double>(d).count());
  return text;
}

// While a thread waits: registered, so that the I/O threads can tell a peer who asks.
class RegisteredWait {
 public:
  explicit RegisteredWait(const detail::RequestState& state) : state_(state) {
    if (state_.waits) state_.waits->begin(&state_, state_.peer);
  }
  ~RegisteredWait() {
    if (state_.waits) state_.waits->end(&state_);
  }
  RegisteredWait(const RegisteredWait&) = delete;
  RegisteredWait& operator=(const RegisteredWait&) = delete;

 private:
  const detail::RequestState& state_;
};

}  // namespace

// The wait asks its peer once it has run answer_wait() short of the timeout: a peer that does
// not answer is blamed (it stopped reading); one that waits for another rank is waited for
// (that rank's own wait will name the rank that failed, and its stop notice ends this one); a
// peer that waits for nobody, or for this rank, gets one more timeout. No wait lasts more
// than three timeouts.
size_t Request::wait() {
  if (!state_) return 0;
  auto& state = *state_;
  const auto start = Clock::now();
  const auto reply_wait = detail::answer_wait(state.timeout);
  const auto ask_after = state.timeout - reply_wait;
  const auto give_up = start + 3 * state.timeout;
  auto deadline = start + (state.ask ? ask_after : state.timeout);
  const RegisteredWait registered(state);
  bool extended_idle = false;
  std::string stuck;  // why the wait ends without the transfer
  auto timed_out = [&] {
    return "threelc: timed out after " + seconds_text(Clock::now() - start) + " waiting for the " +
           state.what + " (THREELC_TIMEOUT)";
  };
  std::unique_lock lock(state.mutex);
  while (!state.cv.wait_until(lock, deadline, [&] { return state.done; })) {
    if (!state.ask) {
      stuck = timed_out();
      break;
    }
    lock.unlock();
    const std::optional<detail::WaitAnswer> answer = state.ask(reply_wait);
    lock.lock();
    if (state.done) break;
    const std::string peer = "rank " + std::to_string(state.peer);
    const auto now = Clock::now();
    std::string why;  // set when the wait ends here
    if (!answer) {
      why = " did not answer within " + seconds_text(reply_wait) +
            " when asked what it waits for (it stopped reading: stalled, or unreachable)";
    } else if (answer->peer >= 0 && answer->peer != state.self) {
      // It asks its own peer once its wait has run as long as this one before asking.
      const auto theirs = std::chrono::milliseconds(answer->waited_ms);
      const auto until_it_asks = std::max<Clock::duration>(ask_after - theirs, Clock::duration(0));
      deadline = now + until_it_asks + 2 * reply_wait;
      if (deadline > give_up) {
        why = " has itself been waiting for rank " + std::to_string(answer->peer) + " for " +
              seconds_text(theirs);
      }
    } else if (!extended_idle) {
      extended_idle = true;
      deadline = std::min(now + ask_after, give_up);
    } else {
      why = answer->peer < 0 ? " answers but waits for no peer and has not completed it"
                             : " waits for this rank (a deadlock)";
    }
    if (!why.empty()) {
      stuck = timed_out() + ": ";
      stuck += peer;
      stuck += why;
      break;
    }
  }
  if (!stuck.empty()) {
    const std::string message = stuck + "; the connection is closed";
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

std::unique_ptr<Context> connect(const Options& requested) {
  const std::string who = rank_prefix(requested.rank);
  if (requested.size < 1 || requested.rank < 0 || requested.rank >= requested.size) {
    throw Error(-1, who + "rank " + std::to_string(requested.rank) + " is not in a job of " +
                        std::to_string(requested.size) + " ranks");
  }
  Options options = requested;
  if (options.size > 1 && !options.wireup.empty()) {
    detail::prepare_launcher_wireup(options);
    if (options.rank != 0) options.wireup.clear();  // rank 0 publishes once it listens
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
                        "(tools/setup.sh --tests does) and rebuild, or use THREELC_TRANSPORT=tcp");
#endif
  }
  throw Error(-1, who + ::threelc::settings::refusal(detail::row("THREELC_TRANSPORT")->doc,
                                                     options.transport));
}

}  // namespace threelc::transport
