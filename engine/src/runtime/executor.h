// Runs the collectives a cycle's responses ask for, on this rank's buffers. One per engine,
// used only by the background thread. A response of a process set other than 0 runs among the
// set's members only (a RankSubset of the job), in the set's terms: its rank, size and root.
// Each run gets a RunScope of its own (run_scope.h); members keep only what lasts across
// runs: the subsets, residuals, buffers and devices.
#pragma once

#include <chrono>
#include <cstddef>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives/feedback_monitor.h"
#include "collectives/hierarchical.h"
#include "collectives/observer.h"
#include "collectives/push_pull.h"
#include "collectives/scratch_buffer.h"
#include "error_feedback.h"
#include "gpu/gpu.h"
#include "negotiation/messages.h"
#include "runtime/handle_table.h"
#include "runtime/host_topology.h"
#include "runtime/operation.h"
#include "runtime/run_scope.h"
#include "runtime/value_space.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// Built from the engine's settings and the transport's timeout (background_loop.cc); the rows
// hold the defaults.
struct ExecutorOptions {
  size_t chunk_bytes = 0;               // THREELC_CHUNK_BYTES
  size_t scale_tile = 0;                // THREELC_SCALE_TILE: values per 3LC scale (0: one a block)
  bool ring = false;                    // THREELC_ALLREDUCE=ring for compressed allreduces
  double feedback_limit = 0;            // THREELC_FEEDBACK_LIMIT (0: no runaway check)
  bool nccl = false;                    // THREELC_NCCL: uncompressed CUDA allreduces over NCCL
  std::string nccl_library;             // THREELC_NCCL_LIBRARY (empty: libnccl.so.2)
  std::chrono::milliseconds timeout{};  // THREELC_TIMEOUT: NCCL's waits
  // THREELC_HIERARCHICAL, where the hosts allow it: compressed allreduces sum inside each host
  // first and run 3LC only across hosts (collectives/hierarchical.h).
  std::optional<HostGroups> hierarchical;
};

// Tags of the data channels, one window per collective: a collective with N ranks uses tag ..
// tag + N (tag + 2 .. tag + N + 2 for the hierarchical cross sum), so a job may have at most
// kMaxRanks ranks for one collective's tags to stay inside its window.
inline constexpr uint32_t kTagWindow = 0x10000;
inline constexpr int kMaxRanks = static_cast<int>(kTagWindow) - 3;
inline constexpr uint32_t kPushPullTag = 0x1000;
inline constexpr uint32_t kRingAllreduceTag = 0x20000;
inline constexpr uint32_t kRawAllreduceTag = 0x30000;
inline constexpr uint32_t kBroadcastTag = 0x40000;
inline constexpr uint32_t kAllgatherTag = 0x50000;
inline constexpr uint32_t kReducescatterTag = 0x60000;
inline constexpr uint32_t kAlltoallTag = 0x70000;
inline constexpr uint32_t kNcclBootstrapTag = 0x80000;  // NCCL's unique id, from rank 0
// THREELC_HIERARCHICAL: local reducescatter (tag), local allgather (tag + 1), the cross sum
// (tag + 2 ..); the local NCCL communicator's unique id on its own tag.
inline constexpr uint32_t kHierarchicalTag = 0x90000;
inline constexpr uint32_t kHierarchicalNcclTag = 0xA0000;
inline constexpr uint32_t kTagsInOrder[] = {
    kPushPullTag,     kRingAllreduceTag,   kRawAllreduceTag, kBroadcastTag,
    kAllgatherTag,    kReducescatterTag,   kAlltoallTag,     kNcclBootstrapTag,
    kHierarchicalTag, kHierarchicalNcclTag};
constexpr bool tag_windows_apart() {
  for (size_t i = 1; i < std::size(kTagsInOrder); ++i) {
    if (kTagsInOrder[i] - kTagsInOrder[i - 1] < kTagWindow) return false;
  }
  return true;
}
static_assert(tag_windows_apart(), "every collective's tags need a window of kTagWindow");

class Executor {
 public:
  Executor(transport::Context& context, const ExecutorOptions& options);

  // Runs a kRun response of a collective among `members` (the job ranks of the tensors'
  // process set, ascending; this rank among them). local[i] is this rank's operation for
  // response.tensors[i], or nullptr where this rank has joined (it takes part with the op's
  // identity or no rows). Returns one result per tensor. Throws transport::Error,
  // CollectiveError or std::invalid_argument; ranks are then out of step and the engine stops.
  std::vector<OpResult> run(const Response& response, std::span<const Operation* const> local,
                            CollectiveObserver* observer, std::span<const int32_t> members);
  // Process set `id` was removed: its ranks' view and its error feedback go.
  void forget_process_set(int32_t id);

  ErrorFeedbackStore& error_feedback() { return residuals_; }
  // What the error-feedback monitor found in the runs since the last call (the caller logs
  // the messages and counts every alert).
  std::vector<FeedbackAlert> take_feedback_alerts() { return std::exchange(alerts_, {}); }

 private:
  // The ranks `response` runs among: the job, or its process set's RankSubset.
  RunScope scope_of(const Response& response, std::span<const int32_t> members);

  // Host tensors (fused_allreduce.cc) or CUDA tensors (gpu/device_allreduce.cc); both end in
  // fused_allreduce over their ValueSpace.
  void allreduce(const RunScope& scope, const Response& response,
                 std::span<const Operation* const> local, CollectiveObserver* observer);
  void host_allreduce(const RunScope& scope, const Response& response,
                      std::span<const Operation* const> local, CollectiveObserver* observer);
  void device_allreduce(const RunScope& scope, const Response& response,
                        std::span<const Operation* const> local, CollectiveObserver* observer);
  // The one allreduce pipeline: copy in, sum, copy out, every step on `space`'s values.
  void fused_allreduce(const RunScope& scope, ValueSpace& space, const Response& response,
                       std::span<const Operation* const> local, CollectiveObserver* observer);
  // The compressed sum of fused_allreduce: push_pull or the ring, flat or hierarchical.
  struct CompressedSum {
    const OpRequest& shape;
    std::span<const float> input;  // `values`, or (direct) the caller's tensor
    std::span<float> values;       // the fused buffer: the sum is written here
    std::span<const TensorSlice> slices;
    const HierarchicalSegment* segment = nullptr;  // this rank's, when hierarchical
    LocalExchange* exchange = nullptr;             // inside the host, when hierarchical
    CollectiveObserver* observer = nullptr;
  };
  void compressed_sum(const RunScope& scope, ValueSpace& space, const CompressedSum& sum);
  // The options of a compressed sum (push_pull or the ring); `feedback` gets one error-feedback
  // sample per piece of `compressed` when `ranks` > 1 (magnitudes measured only where `measure`
  // allows: host memory). feedback_done() reports them after the collective.
  CompressedAllreduceOptions compressed_options(const OpRequest& shape,
                                                std::span<const TensorSlice> compressed, int ranks,
                                                bool measure, std::vector<FeedbackSample>& feedback,
                                                CollectiveObserver* observer);
  void feedback_done(const OpRequest& shape, std::span<const TensorSlice> compressed,
                     std::span<const FeedbackSample> feedback);
  // device_allreduce's uncompressed paths (only in a build with CUDA).
  void nccl_allreduce(const Response& response, std::span<const Operation* const> local,
                      gpu::DeviceState& device);
  void staged_allreduce(const RunScope& scope, const Response& response,
                        std::span<const Operation* const> local, gpu::DeviceState& device,
                        CollectiveObserver* observer);
  void broadcast(const RunScope& scope, const Response& response, const Operation* local,
                 CollectiveObserver* observer);
  OpResult allgather(const RunScope& scope, const Response& response, const Operation* local,
                     CollectiveObserver* observer);
  OpResult reducescatter(const RunScope& scope, const Response& response, const Operation* local,
                         CollectiveObserver* observer);
  OpResult alltoall(const RunScope& scope, const Response& response, const Operation* local,
                    CollectiveObserver* observer);

  transport::Context& context_;
  std::map<int32_t, std::unique_ptr<RankSubset>> subsets_;  // by process set id
  ExecutorOptions options_;
  ErrorFeedbackStore residuals_;
  FeedbackMonitor feedback_;
  std::vector<FeedbackAlert> alerts_;
  std::vector<std::byte> fusion_buffer_;        // reused across cycles
  Workspace workspace_;                         // staging buffers, reused across cycles
  std::map<int, gpu::DeviceStatePtr> devices_;  // per CUDA device, made on first use
  // THREELC_HIERARCHICAL: this host's ranks and this rank's peers on the other hosts.
  std::unique_ptr<RankSubset> local_ranks_;
  std::unique_ptr<RankSubset> cross_ranks_;
  std::unique_ptr<HostLocalExchange> host_exchange_;
};

}  // namespace threelc::engine
