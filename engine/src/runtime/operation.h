// One submitted operation: what every rank must agree on (OpRequest, which travels to the
// coordinator) and what stays on this rank (the buffers and the handle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
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
};
constexpr int kOpKindCount = 7;

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
  std::vector<int64_t> splits;  // alltoall: rows to each rank
  int device = -1;

  size_t element_count() const;  // product of shape (1 for a scalar)
  size_t bytes() const { return element_count() * element_size(dtype); }
  // Rows of the first dimension and elements per row (a scalar is one row of one element).
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  size_t row_elements() const;

  bool operator==(const OpRequest&) const = default;
};

// "float32 [4, 5] sum" and the like, for error messages.
std::string describe(const OpRequest& request);

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
