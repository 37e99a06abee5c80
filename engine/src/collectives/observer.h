// What a collective reports while it runs, for the timeline and the statistics: one event per
// compression, decompression, send, receive or reduction of a block, attributed to the tensor
// the block belongs to. Collectives take an optional observer (nullptr: nothing is recorded)
// and call it from the thread that runs them, through detail::event_start and record_event.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace threelc::engine {

enum class Phase : uint8_t {
  kCompress,    // encoding a block (3LC or raw)
  kDecompress,  // decoding (or decode-adding) a block
  kSend,        // from posting a send to seeing it complete
  kReceive,     // from starting to wait for a message to having it
  kReduce,      // combining raw values (min, max, product, integer sums)
  kCopy,        // copying into or out of a fusion buffer (or a result): "fusion_copy"
};

const char* phase_name(Phase phase);  // "compress", "decompress", "send", "receive", ...

struct PhaseEvent {
  size_t tensor = 0;  // index into the collective's tensor list (0 when it has one tensor)
  Phase phase = Phase::kCompress;
  int64_t begin_ns = 0;  // steady_clock
  int64_t end_ns = 0;
  size_t bytes = 0;  // bytes sent or received (send/receive), encoded bytes (compress/decompress)
  int peer = -1;     // send/receive: the other rank
};

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  virtual void record(const PhaseEvent& event) = 0;
};

inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace detail {

// The start of an event: the time when there is an observer, else 0 (no clock read).
inline int64_t event_start(const CollectiveObserver* observer) {
  return observer != nullptr ? steady_now_ns() : 0;
}

// Records an event that began at `begin_ns` and ends now.
inline void record_event(CollectiveObserver* observer, Phase phase, size_t tensor, int64_t begin_ns,
                         size_t bytes, int peer = -1) {
  if (observer == nullptr) return;
  observer->record(PhaseEvent{tensor, phase, begin_ns, steady_now_ns(), bytes, peer});
}

}  // namespace detail

}  // namespace threelc::engine
