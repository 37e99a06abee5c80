// THREELC_STATS=1: what this rank's engine did, printed at shutdown. Fed by the collectives (as
// their CollectiveObserver) and by the background loop (negotiation, fusion copies, cycles,
// collectives run). It counts collectives (a fused allreduce of many tensors is one); the
// operations callers submitted (one per handle) are threelc_get_statistics's count
// (traffic_counters.h).
//
// Compression ratio. A rank's wire bytes depend on the number of ranks N: an uncompressed
// allreduce (ring or push_pull with raw blocks) puts 2(N-1)/N of its input on the wire per rank,
// a 3LC one 2(N-1)/N of the encoded size. So the ratio printed is
//     (2(N-1)/N * input bytes of the compressed collectives) / wire bytes they sent,
// "times less traffic than the same collectives uncompressed", which does not depend on N and is
// the codec's ratio over the input dtype plus the framing (block headers, tile tables). With one
// rank nothing is sent and no ratio is printed.
//
// Time per phase is summed over events: compress, decompress, reduce, fusion copy and receive
// (waiting for a message) happen on the collective's thread one at a time; a send is counted from
// posting to completion, so send time overlaps the others and can exceed the wall time.
//
// Not thread-safe: the background thread (and the collectives it runs) feed it; report() is
// called after that thread has stopped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "collectives/observer.h"

namespace threelc::engine {

enum class StatsPhase : uint8_t {
  kNegotiate,   // coordinating with the other ranks which tensors are ready
  kFusionCopy,  // copying into and out of fusion buffers
  kCompress,
  kDecompress,
  kReduce,   // combining raw values
  kSend,     // posting to completion of a send (overlaps the rest)
  kReceive,  // waiting for a message
};
constexpr int kStatsPhaseCount = 7;

const char* stats_phase_name(StatsPhase phase);  // "negotiate", "fusion copy", ...

class Stats : public CollectiveObserver {
 public:
  // What was sent and done for one kind of collective (or for the compressed ones).
  struct Totals {
    uint64_t collectives = 0;  // collectives run (a fused allreduce of many tensors is one)
    uint64_t tensors = 0;      // tensors they carried
    uint64_t input_bytes = 0;
    uint64_t wire_bytes = 0;  // bytes this rank sent for them
  };

  explicit Stats(int size);

  // From the collectives: send / receive bytes count as wire traffic; every event's duration
  // goes to its phase (kCopy to kFusionCopy).
  void record(const PhaseEvent& event) override;

  void add_negotiation(int64_t ns) { phase_ns_[index(StatsPhase::kNegotiate)] += ns; }
  // Fusion copies the engine makes itself (the collectives report theirs as kCopy events);
  // a copy is reported one way, not both.
  void add_fusion_copy(int64_t ns) { phase_ns_[index(StatsPhase::kFusionCopy)] += ns; }
  // One cycle of the background loop took `ns` of wall time.
  void add_cycle(int64_t ns);
  // A collective finished: `kind` is its name ("allreduce", op_kind_name()), carrying `tensors`
  // tensors of `input_bytes` in all, 3LC-compressed or not, for which this rank sent
  // `wire_bytes_sent` (e.g. the difference of bytes_sent() around it).
  void collective_done(std::string_view kind, size_t tensors, size_t input_bytes, bool compressed,
                       size_t wire_bytes_sent);
  // The error-feedback monitor (collectives/feedback_monitor.h) found a tensor's residual
  // running away at a sampled step, or a compressed tensor's values not finite (sent raw).
  void add_feedback_runaway() { ++feedback_runaways_; }
  void add_non_finite_step() { ++non_finite_steps_; }

  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  int64_t phase_ns(StatsPhase phase) const { return phase_ns_[index(phase)]; }
  int64_t loop_ns() const { return loop_ns_; }
  uint64_t cycles() const { return cycles_; }
  const std::map<std::string, Totals, std::less<>>& by_kind() const { return by_kind_; }
  const Totals& compressed() const { return compressed_; }
  const Totals& uncompressed() const { return uncompressed_; }
  // The ratio described above; 0 when nothing compressed was sent.
  double compression_ratio() const;

  // A few human-readable lines, each ending in '\n', the first naming the rank and the size.
  std::string report(int rank) const;

 private:
  static constexpr size_t index(StatsPhase phase) { return static_cast<size_t>(phase); }

  int size_;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  int64_t phase_ns_[kStatsPhaseCount] = {};
  int64_t loop_ns_ = 0;
  uint64_t cycles_ = 0;
  std::map<std::string, Totals, std::less<>> by_kind_;
  Totals compressed_;
  Totals uncompressed_;
  uint64_t feedback_runaways_ = 0;
  uint64_t non_finite_steps_ = 0;
};

}  // namespace threelc::engine
