// Counters behind threelc_get_statistics: written by the background thread, read by any.
#pragma once

#include <atomic>
#include <cstdint>

namespace threelc::engine {

struct TrafficCounters {
  std::atomic<uint64_t> wire_bytes_sent{0};
  std::atomic<uint64_t> wire_bytes_received{0};
  std::atomic<uint64_t> operations{0};  // submitted operations completed: one per handle
  std::atomic<uint64_t> allreduce_bytes{0};
};

}  // namespace threelc::engine
