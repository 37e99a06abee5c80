#include "runtime/engine.h"

#include <unistd.h>

#include <cstdio>

#include "engine_error.h"
#include "negotiation/wire.h"
#include "threelc/threelc.h"

namespace threelc::engine {

namespace {

EngineSettings read_settings() {
  try {
    return engine_settings_from_environment();
  } catch (const std::invalid_argument& e) {
    throw EngineError(THREELC_EINVAL, e.what());
  }
}

transport::Options read_transport_options() {
  try {
    return transport::options_from_environment();
  } catch (const transport::Error& e) {
    throw EngineError(THREELC_EINVAL, e.what());
  }
}

std::string host_name(const EngineSettings& settings) {
  if (!settings.hostname.empty()) return settings.hostname;
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return "localhost";
  return buffer;
}

}  // namespace

Engine::Engine(HandleTable& handles)
    : settings_(read_settings()),
      transport_options_(read_transport_options()),
      log_(settings_.log_level, transport_options_.rank),
      stats_(transport_options_.size),
      handles_(handles) {
  try {
    context_ = transport::connect(transport_options_);
    identity_ = exchange_identity(*context_, transport_options_, host_name(settings_));
  } catch (const transport::Error& e) {
    if (context_) context_->stop(e.what());  // the peers learn the cause, not a closed socket
    throw EngineError(THREELC_EPEER, e.what(), e.peer());
  } catch (const NegotiationError& e) {
    if (context_) context_->stop(e.what());
    throw;
  }
  process_sets_ = std::make_unique<ProcessSetTable>(identity_.size);
  if (!settings_.timeline.empty() && identity_.rank == 0) {
    try {
      timeline_ = std::make_unique<Timeline>(settings_.timeline, identity_.rank);
    } catch (const std::exception& e) {
      throw EngineError(THREELC_EINVAL, std::string("THREELC_TIMELINE: ") + e.what());
    }
  }
  if (log_.enabled(LogLevel::kInfo)) {
    log_.log(LogLevel::kInfo, "joined: rank " + std::to_string(identity_.rank) + " of " +
                                  std::to_string(identity_.size) + ", local " +
                                  std::to_string(identity_.local_rank) + "/" +
                                  std::to_string(identity_.local_size) + ", host " +
                                  std::to_string(identity_.cross_rank) + "/" +
                                  std::to_string(identity_.cross_size) + "; compression " +
                                  (settings_.compression ? "threelc" : "none") +
                                  " (s=" + std::to_string(settings_.sparsity) + "), allreduce " +
                                  allreduce_algorithm_name(settings_.allreduce) + ", fusion " +
                                  std::to_string(settings_.fusion_threshold) + " B, chunk " +
                                  std::to_string(settings_.chunk_bytes) + " B");
  }
  LoopParts parts;
  parts.context = context_.get();
  parts.queue = &queue_;
  parts.handles = &handles_;
  parts.settings = &settings_;
  parts.log = &log_;
  parts.timeline = timeline_.get();
  parts.stats = &stats_;
  parts.counters = &counters_;
  parts.process_sets = process_sets_.get();
  parts.timeout = transport_options_.timeout;
  parts.hierarchical = hierarchical_groups();
  loop_ = std::make_unique<BackgroundLoop>(parts);
  thread_ = std::thread([this] { run_loop(); });
}

Engine::~Engine() { shutdown(); }

std::optional<HostGroups> Engine::hierarchical_groups() const {
  if (!settings_.hierarchical) return std::nullopt;
  std::string why_not;
  std::optional<HostGroups> groups = host_groups(identity_, why_not);
  if (!groups) {
    // Every rank knows every host, so every rank decides alike; rank 0 says it once.
    if (identity_.rank == 0) {
      log_.log(LogLevel::kWarning, "THREELC_HIERARCHICAL=1 ignored: " + why_not +
                                       "; compressed allreduces run over all ranks at once");
    }
    return std::nullopt;
  }
  if (log_.enabled(LogLevel::kInfo)) {
    auto list = [](const std::vector<int>& ranks) {
      std::string s;
      for (int r : ranks) {
        if (!s.empty()) s += ',';
        s += std::to_string(r);
      }
      return s;
    };
    log_.log(LogLevel::kInfo, "hierarchical allreduce: this host's ranks " + list(groups->local) +
                                  ", across hosts with ranks " + list(groups->cross));
  }
  return groups;
}

void Engine::run_loop() {
  LoopStop stop = loop_->run(shutdown_requested_);
  {
    std::lock_guard lock(stop_mutex_);
    stopped_ = true;
    stop_ = stop;
  }
  loop_->fail_everything(stop.code, stop.reason);
  // After a failure the connections are useless: closing them tells every peer at once
  // instead of at its next timeout.
  if (stop.code != THREELC_ESHUTDOWN) context_.reset();
}

void Engine::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  shutdown_requested_ = true;
  queue_.wake();
  if (thread_.joinable()) thread_.join();
  log_.log(LogLevel::kInfo, "shut down: " + stop_.reason);
  if (settings_.stats) {
    const std::string report = stats_.report(identity_.rank);
    std::fwrite(report.data(), 1, report.size(), stderr);
  }
  if (timeline_) timeline_->close();
  context_.reset();
}

size_t Engine::save_feedback(std::string_view prefix, std::span<std::byte> out) {
  return loop_->error_feedback().save(prefix, static_cast<uint32_t>(identity_.rank),
                                      static_cast<uint32_t>(identity_.size), out);
}

void Engine::load_feedback(std::string_view prefix, std::span<const std::byte> blob) {
  loop_->error_feedback().load(prefix, static_cast<uint32_t>(identity_.rank),
                               static_cast<uint32_t>(identity_.size), blob);
}

std::string Engine::unnamed(OpKind kind, int32_t process_set) {
  std::lock_guard lock(stop_mutex_);
  return std::string(op_kind_name(kind)) + ".noname." +
         std::to_string(unnamed_counts_[{kind, process_set}]++);
}

Handle Engine::submit(Operation operation) {
  std::lock_guard lock(stop_mutex_);
  if (stopped_) throw EngineError(stop_.code, stop_.reason);
  operation.handle = handles_.create();
  operation.submitted_ns = steady_now_ns();
  const Handle handle = operation.handle;
  try {
    queue_.submit(std::move(operation));
  } catch (...) {
    handles_.release(handle);
    throw;
  }
  return handle;
}

}  // namespace threelc::engine
