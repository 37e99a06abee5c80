// Forwards a response's collective events to the timeline (by tensor name) and the statistics.
#pragma once

#include <span>

#include "collectives/observer.h"
#include "observe/stats.h"
#include "observe/timeline.h"
#include "runtime/operation.h"
#include "runtime/traffic_counters.h"

namespace threelc::engine {

class ResponseObserver : public CollectiveObserver {
 public:
  ResponseObserver(Timeline* timeline, Stats* stats, TrafficCounters* counters,
                   std::span<const OpRequest> tensors)
      : timeline_(timeline), stats_(stats), counters_(counters), tensors_(tensors) {}

  void record(const PhaseEvent& event) override {
    if (event.phase == Phase::kSend) counters_->wire_bytes_sent += event.bytes;
    if (event.phase == Phase::kReceive) counters_->wire_bytes_received += event.bytes;
    if (stats_) stats_->record(event);
    if (timeline_ && event.tensor < tensors_.size()) {
      timeline_->span(tensors_[event.tensor].name, phase_name(event.phase), event.begin_ns,
                      event.end_ns, event.bytes, event.peer);
    }
  }

 private:
  Timeline* timeline_;
  Stats* stats_;
  TrafficCounters* counters_;
  std::span<const OpRequest> tensors_;
};

}  // namespace threelc::engine
