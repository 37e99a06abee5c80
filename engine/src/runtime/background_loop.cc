#include "runtime/background_loop.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <thread>

#include "collectives/push_pull.h"
#include "negotiation/wire.h"
#include "runtime/control_channel.h"
#include "runtime/response_observer.h"
#include "threelc/threelc.h"

namespace threelc::engine {

BackgroundLoop::BackgroundLoop(const LoopParts& parts)
    : parts_(parts),
      rank_(parts.context->rank()),
      size_(parts.context->size()),
      cache_(parts.settings->cache_capacity),
      executor_(*parts.context,
                ExecutorOptions{.chunk_bytes = parts.settings->chunk_bytes,
                                .scale_tile = parts.settings->scale_tile,
                                .ring = parts.settings->allreduce == AllreduceAlgorithm::kRing,
                                .feedback_limit = parts.settings->feedback_limit,
                                .nccl = parts.settings->nccl,
                                .nccl_library = parts.settings->nccl_library,
                                .timeout = parts.timeout,
                                .hierarchical = parts.hierarchical}) {
  if (rank_ == 0) coordinator_.emplace(Coordinator::Options::from(*parts.settings, size_));
}

std::vector<OpRequest> BackgroundLoop::resolve(const CycleRequest& request) const {
  std::vector<OpRequest> out;
  out.reserve(request.cache_hits.size() + request.requests.size());
  for (uint32_t slot : request.cache_hits) out.push_back(cache_.at(slot));
  for (const OpRequest& r : request.requests) out.push_back(r);
  return out;
}

CycleResponse BackgroundLoop::coordinate(const CycleRequest& own) {
  const auto now = Coordinator::Clock::now();
  std::deque<ControlReceive> receives;
  for (int peer = 1; peer < size_; ++peer) receives.emplace_back(parts_.context->control(peer));
  coordinator_->add(0, resolve(own), own.shutdown, now, own.blocked);
  for (int peer = 1; peer < size_; ++peer) {
    CycleRequest theirs;
    try {
      theirs = parse_cycle_request(receives[static_cast<size_t>(peer - 1)].wait());
    } catch (const NegotiationError& e) {
      throw NegotiationError(
          "negotiation message from rank " + std::to_string(peer) + ": " + e.what(), peer);
    }
    coordinator_->add(peer, resolve(theirs), theirs.shutdown, now, theirs.blocked);
  }
  CycleResponse response = coordinator_->respond(now);
  if (parts_.log->enabled(LogLevel::kTrace)) {
    for (const Response& r : response.responses) {
      parts_.log->log(LogLevel::kTrace,
                      std::string(r.type == ResponseType::kError ? "error " : "run ") +
                          op_kind_name(r.kind) + " of " + std::to_string(r.tensors.size()) +
                          " tensor(s), first '" + (r.tensors.empty() ? "" : r.tensors[0].name) +
                          "'");
    }
  }
  for (const std::string& warning : coordinator_->stall_warnings(now)) {
    parts_.log->log(LogLevel::kWarning, warning);
  }
  const std::vector<std::byte> bytes = serialize(response, cache_);
  for (int peer = 1; peer < size_; ++peer) send_control(parts_.context->control(peer), bytes);
  return response;
}

CycleResponse BackgroundLoop::negotiate(bool shutdown) {
  CycleRequest own;
  own.shutdown = shutdown;
  own.blocked = parts_.handles->blocked(std::chrono::steady_clock::now());
  for (OpRequest& r : parts_.queue->take_new()) {
    if (auto slot = cache_.find(r)) {
      own.cache_hits.push_back(*slot);
    } else {
      own.requests.push_back(std::move(r));
    }
  }
  if (rank_ == 0) return coordinate(own);
  ControlReceive receive(parts_.context->control(0));
  send_control(parts_.context->control(0), serialize(own));
  CycleResponse response;
  try {
    // Rank 0 answers once it heard from every rank: when one is stalled, this wait learns that
    // rank 0 waits for it, and rank 0's stop notice names it.
    response = parse_cycle_response(receive.wait(), cache_);
  } catch (const NegotiationError& e) {
    throw NegotiationError(std::string("negotiation message from rank 0: ") + e.what(), 0);
  }
  if (!response.abort.empty())
    throw EngineError(THREELC_EPEER, "rank 0 stopped: " + response.abort);
  return response;
}

void BackgroundLoop::abort_workers(const std::string& reason) noexcept {
  if (rank_ != 0) return;
  CycleResponse abort;
  abort.abort = reason;
  const std::vector<std::byte> bytes = serialize(abort, cache_);
  for (int peer = 1; peer < size_; ++peer) {
    try {
      send_control(parts_.context->control(peer), bytes);
    } catch (const std::exception&) {
      // That peer is gone or out of step: it finds out by itself.
    }
  }
}

std::string BackgroundLoop::stop_transport(const std::exception& error) {
  if (stop_cause_) return *stop_cause_;
  stop_cause_ = error.what();
  abort_workers(*stop_cause_);
  parts_.context->stop(*stop_cause_);
  return *stop_cause_;
}

void BackgroundLoop::execute(const Response& response, int64_t arrived_ns) {
  // An error may concern a tensor this rank never sent (a stall timeout): it fails only what the
  // coordinator knew of, never an operation of that name submitted since. A refusal of a
  // submission for its process set concerns the ranks it names only.
  const bool error = response.type == ResponseType::kError;
  const auto& failed = response.failed_ranks;
  if (error && !failed.empty() && std::find(failed.begin(), failed.end(), rank_) == failed.end()) {
    return;
  }
  // A collective of a process set runs among its members; the others only keep their response
  // cache in step (every rank applies every response's updates).
  std::vector<int32_t> members;
  if (!error && !negotiated_globally(response.kind)) {
    const int32_t set = response.tensors[0].process_set;
    auto known = parts_.process_sets->members(set);
    if (!known) {
      throw EngineError(THREELC_EINTERNAL, "rank 0 ran a " +
                                               std::string(op_kind_name(response.kind)) + " in " +
                                               parts_.process_sets->unknown(set) + " on this rank");
    }
    members = std::move(*known);
    if (member_index(members, rank_) < 0) {
      for (const OpRequest& t : response.tensors) cache_.use(t);
      return;
    }
  }
  std::vector<std::optional<Operation>> taken;
  taken.reserve(response.tensors.size());
  for (const OpRequest& t : response.tensors) {
    taken.push_back(error ? parts_.queue->take_sent(key_of(t)) : parts_.queue->take(key_of(t)));
  }
  std::vector<const Operation*> local;  // after `taken` is complete: it points into it
  local.reserve(taken.size());
  for (const auto& op : taken) local.push_back(op ? &*op : nullptr);
  auto finish = [&](int code, const std::string& message, std::vector<OpResult>* results) {
    for (size_t i = 0; i < taken.size(); ++i) {
      if (!taken[i]) continue;
      // The name leaves the queue first: a caller woken by complete() may submit it again.
      parts_.queue->finish(key_of(taken[i]->request));
      ++parts_.counters->operations;
      parts_.handles->complete(taken[i]->handle, code, message,
                               results ? std::move((*results)[i]) : OpResult{});
    }
  };
  if (error) {
    finish(response.error_code, response.error_message, nullptr);
    return;
  }
  if (response.kind == OpKind::kAddProcessSet || response.kind == OpKind::kRemoveProcessSet) {
    std::vector<OpResult> results{change_process_sets(response)};
    finish(THREELC_OK, "", &results);
    return;
  }
  const int64_t start_ns = steady_now_ns();
  if (parts_.timeline) {
    for (const auto& op : taken) {
      if (!op) continue;
      parts_.timeline->span(op->request.name, "negotiate", op->submitted_ns, arrived_ns);
      parts_.timeline->span(op->request.name, "queue", arrived_ns, start_ns);
    }
  }
  ResponseObserver observer(parts_.timeline, parts_.stats, parts_.counters, response.tensors);
  try {
    const uint64_t sent_before = parts_.stats->bytes_sent();
    std::vector<OpResult> results = executor_.run(response, local, &observer, members);
    report_feedback();
    size_t input_bytes = 0;
    for (const OpRequest& t : response.tensors) input_bytes += t.bytes();
    parts_.stats->collective_done(op_kind_name(response.kind), response.tensors.size(), input_bytes,
                                  response.tensors[0].compress,
                                  parts_.stats->bytes_sent() - sent_before);
    if (response.kind == OpKind::kAllreduce) parts_.counters->allreduce_bytes += input_bytes;
    finish(THREELC_OK, "", &results);
  } catch (const std::exception& e) {
    // Peers first: the operations' buffers stay untouched once the transport has stopped.
    const std::string cause = stop_transport(e);
    finish(THREELC_EPEER, cause, nullptr);
    throw;
  }
  for (const OpRequest& t : response.tensors) cache_.use(t);
}

OpResult BackgroundLoop::change_process_sets(const Response& response) {
  OpResult result;
  const OpRequest& request = response.tensors[0];
  if (response.kind == OpKind::kAddProcessSet) {
    parts_.process_sets->add(response.assigned_set, request.members);
    result.process_set = response.assigned_set;
    parts_.log->log(LogLevel::kInfo, "process set " + std::to_string(response.assigned_set) +
                                         " added: ranks " + members_text(request.members));
  } else {
    parts_.process_sets->remove(request.removed_set);
    executor_.forget_process_set(request.removed_set);
    result.process_set = request.removed_set;
    parts_.log->log(LogLevel::kInfo,
                    "process set " + std::to_string(request.removed_set) + " removed");
  }
  return result;
}

void BackgroundLoop::report_feedback() {
  for (const FeedbackAlert& alert : executor_.take_feedback_alerts()) {
    const bool runaway = alert.kind == FeedbackAlertKind::kRunaway;
    if (runaway) {
      parts_.stats->add_feedback_runaway();
    } else {
      parts_.stats->add_non_finite_step();
    }
    if (!alert.message.empty()) {
      parts_.log->log(runaway ? LogLevel::kError : LogLevel::kWarning, alert.message);
    }
  }
}

void BackgroundLoop::fail_everything(int code, const std::string& reason) {
  for (Operation& op : parts_.queue->take_all()) {
    ++parts_.counters->operations;
    parts_.handles->complete(op.handle, code, reason);
  }
}

LoopStop BackgroundLoop::run(const std::atomic<bool>& shutdown_requested) {
  const auto cycle = parts_.settings->cycle_time;
  auto next = std::chrono::steady_clock::now();
  LoopStop stop;
  std::string cause;
  try {
    for (;;) {
      if (!shutdown_requested.load()) {
        // Nothing in flight here: no cycle is needed until something is submitted, but one
        // runs every kIdleCycle all the same, so that rank 0 keeps answering and watching
        // for stalls. A submission is negotiated a cycle time after it arrives, so that what
        // is submitted with it (the rest of a bucket) goes in the same cycle, or at once
        // after a flush (threelc_flush: the caller has submitted all it will for now).
        const auto idle_since = std::chrono::steady_clock::now();
        parts_.queue->wait_while_idle(idle_since + kIdleCycle, shutdown_requested);
        const auto woken = std::chrono::steady_clock::now();
        if (woken - idle_since >= cycle) next = std::max(next, woken + cycle);
        if (!shutdown_requested.load()) parts_.queue->wait_for_cycle(next, shutdown_requested);
      }
      const bool shutdown = shutdown_requested.load();
      next = std::max(next + cycle, std::chrono::steady_clock::now());
      const int64_t begin_ns = steady_now_ns();
      CycleResponse cycle_response = negotiate(shutdown);
      const int64_t arrived_ns = steady_now_ns();
      parts_.stats->add_negotiation(arrived_ns - begin_ns);
      for (const Response& r : cycle_response.responses) execute(r, arrived_ns);
      const int64_t end_ns = steady_now_ns();
      parts_.stats->add_cycle(end_ns - begin_ns);
      if (parts_.timeline) parts_.timeline->flush_if_due(end_ns);
      if (cycle_response.shutdown) {
        stop.code = THREELC_ESHUTDOWN;
        stop.reason = "threelc was shut down (rank " +
                      std::to_string(cycle_response.shutdown_rank) +
                      " called threelc_shutdown) before this operation ran";
        break;
      }
    }
  } catch (const transport::Error& e) {
    cause = stop_transport(e);
    stop.code = THREELC_EPEER;
  } catch (const EngineError& e) {  // a collective's or negotiation's: THREELC_EPEER
    cause = stop_transport(e);
    stop.code = e.code();
  } catch (const std::exception& e) {
    cause = stop_transport(e);
    stop.code = THREELC_EINTERNAL;
  }
  if (stop.code != THREELC_ESHUTDOWN) {
    stop.reason = "threelc stopped: " + cause;
    parts_.log->log(LogLevel::kError, stop.reason);
  }
  return stop;
}

}  // namespace threelc::engine
