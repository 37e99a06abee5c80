#include "negotiation/coordinator.h"

#include <utility>

#include "negotiation/fusion.h"
#include "negotiation/process_set_policy.h"
#include "negotiation/readiness.h"

namespace threelc::engine {

Coordinator::Options Coordinator::Options::from(const EngineSettings& settings, int size) {
  return {.size = size,
          .fusion_threshold = settings.fusion_threshold,
          .stall_warning = settings.stall_check_time,
          .stall_timeout = settings.stall_timeout,
          .deadlock_timeout = settings.deadlock_timeout};
}

Coordinator::Coordinator(const Options& options)
    : options_(options),
      sets_(options.size),
      pending_(sets_, options.stall_warning),
      watchdog_(options.size, options.stall_timeout, options.deadlock_timeout) {}

Coordinator::~Coordinator() = default;

void Coordinator::add(int rank, std::vector<OpRequest> requests, bool shutdown,
                      Clock::time_point now, bool blocked) {
  if (shutdown && shutdown_rank_ < 0) shutdown_rank_ = rank;
  watchdog_.heard(rank, !requests.empty(), blocked);
  for (OpRequest& r : requests) {
    if (auto refused = refusal(rank, r, sets_)) {
      refused_.push_back(std::move(*refused));
    } else {
      pending_.add(rank, std::move(r), now);
    }
  }
}

CycleResponse Coordinator::respond(Clock::time_point now) {
  std::vector<Response> singles = std::exchange(refused_, {});
  const std::vector<OpKey> ready = ready_tensors(pending_);
  bool progressed = !ready.empty() || !singles.empty();
  for (const OpKey& key : ready) decide(key, singles);
  CycleResponse out;
  out.responses = fuse(std::move(singles), options_.fusion_threshold);
  for (Response& failed : watchdog_.time_out(pending_, now)) {
    out.responses.push_back(std::move(failed));
    progressed = true;
  }
  if (auto join = completed_join(pending_)) {
    out.responses.push_back(std::move(*join));
    progressed = true;
  }
  const bool stopping = shutdown_rank_ >= 0;
  for (Response& failed : watchdog_.break_deadlock(pending_, now, progressed, stopping)) {
    out.responses.push_back(std::move(failed));
  }
  out.shutdown = stopping;
  out.shutdown_rank = shutdown_rank_;
  return out;
}

void Coordinator::decide(const OpKey& key, std::vector<Response>& out) {
  const std::optional<PendingTensor> tensor = pending_.take(key);
  if (!tensor) return;  // its set was removed earlier in this cycle
  const OpRequest& first = tensor->first_request();
  if (auto failed = mismatch(key, *tensor)) {
    out.push_back(std::move(*failed));
  } else if (first.kind == OpKind::kAddProcessSet) {
    out.push_back(add_process_set(first, sets_));
  } else if (first.kind == OpKind::kRemoveProcessSet) {
    remove_process_set(first, sets_, pending_, out);
  } else {
    out.push_back(run(key, *tensor, pending_, sets_));
  }
}

std::vector<std::string> Coordinator::stall_warnings(Clock::time_point now) {
  return pending_.stall_warnings(now);
}

}  // namespace threelc::engine
