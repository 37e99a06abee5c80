// One submitted operation: what every rank must agree on (OpRequest, which travels to the
// coordinator) and what stays on this rank (the buffers and the handle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "element_type.h"

namespace threelc::engine {

enum class OpKind : uint8_t {
  kAllreduce = 0,
  kBroadcast = 1,
  kAllgather = 2,
  kReducescatter = 3,
  kAlltoall = 4,
  kBarrier = 5,
  kJoin = 6,
  // Process sets: negotiated among every rank of the job (process set 0), like join.
  kAddProcessSet = 7,
  kRemoveProcessSet = 8,
};
constexpr int kOpKindCount = 9;

// The global process set: every rank of the job.
inline constexpr int32_t kGlobalProcessSet = 0;

const char* op_kind_name(OpKind kind);  // "allreduce", "broadcast", ...

struct OpRequest {
  std::string name;
  OpKind kind = OpKind::kAllreduce;
  ElementType dtype = ElementType::kFloat32;
  std::vector<int64_t> shape;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  bool compress = false;        // resolved on the submitting rank: 3LC will be used
  float sparsity = 1.0f;        // meaningful when compress
  int root = 0;                 // broadcast
  std::vector<int64_t> splits;  // alltoall: rows to each member of the process set
  int device = -1;
  // The process set the operation runs in (0: every rank). Add and remove run in set 0.
  int32_t process_set = kGlobalProcessSet;
  std::vector<int32_t> members;  // kAddProcessSet: the new set's job ranks, ascending
  int32_t removed_set = 0;       // kRemoveProcessSet: the id of the set removed

  size_t element_count() const;  // product of shape (1 for a scalar)
  size_t bytes() const { return element_count() * element_size(dtype); }
  // Rows of the first dimension and elements per row (a scalar is one row of one element).
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  size_t row_elements() const;

  bool operator==(const OpRequest&) const = default;
};

// "float32 [4, 5] sum" and the like, for error messages.
std::string describe(const OpRequest& request);

// What identifies an operation in flight: its name within its process set. The same name may
// be in flight in two sets at once.
struct OpKey {
  int32_t process_set = kGlobalProcessSet;
  std::string name;
  bool operator==(const OpKey&) const = default;
  bool operator<(const OpKey& other) const {
    return std::tie(process_set, name) < std::tie(other.process_set, other.name);
  }
};
struct OpKeyHash {
  size_t operator()(const OpKey& key) const {
    return std::hash<std::string>()(key.name) ^
           (static_cast<size_t>(key.process_set) * 0x9E3779B97F4A7C15ull);
  }
};
inline OpKey key_of(const OpRequest& request) { return {request.process_set, request.name}; }
// "'w'" in the global set, "'w' (process set 2)" in another: how messages name a tensor.
std::string quoted(const OpKey& key);
// Add, remove and join are negotiated among every rank of the job, whatever their set.
bool negotiated_globally(OpKind kind);

using Handle = int64_t;

struct Operation {
  OpRequest request;
  const void* input = nullptr;
  void* output = nullptr;
  Handle handle = 0;
  int64_t submitted_ns = 0;  // steady clock
  // CUDA tensors: an event recorded on the framework's stream at submission (gpu/gpu.h); the
  // background thread's stream waits for it before it reads the input.
  std::shared_ptr<void> ready;
};

}  // namespace threelc::engine
