#include "api/requests.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine_error.h"
#include "gpu/gpu.h"
#include "negotiation/coordinator.h"

namespace threelc::engine {

namespace {

[[noreturn]] void invalid(OpKind kind, const std::string& what) {
  throw EngineError(THREELC_EINVAL, std::string(op_kind_name(kind)) + ": " + what);
}

void check_tensor(OpKind kind, const threelc_tensor& t, OpRequest& r) {
  if (t.dtype < 0 || t.dtype >= kElementTypeCount) {
    invalid(kind, "dtype " + std::to_string(t.dtype) + " is not a threelc_dtype");
  }
  r.dtype = static_cast<ElementType>(t.dtype);
  if (t.ndim < 0 || t.ndim > THREELC_MAX_DIMS) {
    invalid(kind, "ndim " + std::to_string(t.ndim) + " is outside 0.." +
                      std::to_string(THREELC_MAX_DIMS));
  }
  if (t.ndim > 0 && t.shape == nullptr) invalid(kind, "shape is NULL with ndim > 0");
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) invalid(kind, "dimension " + std::to_string(i) + " is negative");
    r.shape.push_back(t.shape[i]);
  }
  if (t.device < THREELC_DEVICE_CPU) {
    invalid(kind, "device " + std::to_string(t.device) +
                      " is neither THREELC_DEVICE_CPU (-1) nor a CUDA device ordinal");
  }
  if (t.device >= 0) {
    if (kind != OpKind::kAllreduce) {
      invalid(kind, "device " + std::to_string(t.device) +
                        ": only allreduce takes CUDA tensors (stage this one through host memory)");
    }
    if (const std::string why = gpu::unavailable_reason(); !why.empty()) {
      invalid(kind, "device " + std::to_string(t.device) + ": " + why);
    }
  }
  r.device = t.device;
  if (r.bytes() > 0 && t.data == nullptr) invalid(kind, "data is NULL");
  const bool needs_output = kind == OpKind::kAllreduce || kind == OpKind::kBroadcast;
  if (needs_output && r.bytes() > 0 && t.output == nullptr) invalid(kind, "output is NULL");
  if ((kind == OpKind::kAllgather || kind == OpKind::kAlltoall || kind == OpKind::kReducescatter) &&
      t.ndim == 0) {
    invalid(kind, "needs a tensor with at least one dimension");
  }
}

void check_reduction(OpKind kind, const threelc_options& o, OpRequest& r) {
  if (o.op < 0 || o.op >= kReduceOpCount) {
    invalid(kind, "op " + std::to_string(o.op) + " is not a threelc_reduce_op");
  }
  r.op = static_cast<ReduceOp>(o.op);
  if (r.dtype == ElementType::kBool) {
    invalid(kind, "bool tensors are not reduced (broadcast, allgather and alltoall move them)");
  }
  if (!std::isfinite(o.prescale) || !std::isfinite(o.postscale)) {
    invalid(kind, "prescale and postscale must be finite");
  }
  r.prescale = o.prescale;
  r.postscale = o.postscale;
}

void resolve_compression(const EngineSettings& settings, const threelc_options& o, OpRequest& r) {
  bool wanted = settings.compression;
  if (o.compression == THREELC_COMPRESSION_NONE) {
    wanted = false;
  } else if (o.compression == THREELC_COMPRESSION_3LC) {
    wanted = true;
  } else if (o.compression != THREELC_COMPRESSION_DEFAULT) {
    invalid(r.kind,
            "compression " + std::to_string(o.compression) + " is not a threelc_compression");
  }
  float sparsity = settings.sparsity;
  if (o.sparsity != 0.0f) {
    if (!(o.sparsity >= 1.0f && o.sparsity < 2.0f)) {
      invalid(r.kind, "sparsity " + std::to_string(o.sparsity) + " is outside [1, 2)");
    }
    sparsity = o.sparsity;
  }
  r.compress = wanted && is_floating(r.dtype) &&
               (r.op == ReduceOp::kSum || r.op == ReduceOp::kAverage) &&
               r.bytes() >= settings.min_compress_bytes && r.element_count() > 0;
  r.sparsity = r.compress ? sparsity : 1.0f;
}

// The members of process set `id`, which this rank must belong to.
std::vector<int32_t> process_set_members(const Engine& engine, OpKind kind, int id) {
  if (id < 0) invalid(kind, "process_set " + std::to_string(id) + " is not a process set id");
  const ProcessSetTable& sets = engine.process_sets();
  auto members = sets.members(id);
  if (!members) {
    invalid(kind, sets.unknown(id) + " on rank " + std::to_string(engine.identity().rank));
  }
  if (member_index(*members, engine.identity().rank) < 0) {
    invalid(kind, "rank " + std::to_string(engine.identity().rank) +
                      " is not a member of process set " + std::to_string(id) + " (ranks " +
                      members_text(*members) + ")");
  }
  return std::move(*members);
}

void resolve_splits(const threelc_options& o, int size, OpRequest& r) {
  const int64_t rows = r.rows();
  if (o.splits == nullptr) {
    if (rows % size != 0) {
      invalid(r.kind, "first dimension " + std::to_string(rows) + " does not divide among " +
                          std::to_string(size) + " ranks; pass splits");
    }
    r.splits.assign(static_cast<size_t>(size), rows / size);
    return;
  }
  if (o.nsplits != size) {
    invalid(r.kind, "nsplits " + std::to_string(o.nsplits) + " differs from the size " +
                        std::to_string(size) + " of process set " + std::to_string(r.process_set));
  }
  int64_t total = 0;
  for (int j = 0; j < size; ++j) {
    if (o.splits[j] < 0) invalid(r.kind, "splits[" + std::to_string(j) + "] is negative");
    total += o.splits[j];
    r.splits.push_back(o.splits[j]);
  }
  if (total != rows) {
    invalid(r.kind, "splits sum to " + std::to_string(total) + " but the first dimension is " +
                        std::to_string(rows));
  }
}

}  // namespace

Operation make_operation(Engine& engine, OpKind kind, const threelc_tensor* tensor,
                         const threelc_options* options) {
  threelc_options defaults;
  threelc_options_init(&defaults);
  const threelc_options& o = options ? *options : defaults;
  Operation op;
  OpRequest& r = op.request;
  r.kind = kind;
  if (kind != OpKind::kBarrier && kind != OpKind::kJoin) {
    if (tensor == nullptr) invalid(kind, "tensor is NULL");
    check_tensor(kind, *tensor, r);
    op.input = tensor->data;
    op.output = tensor->output;
    if (r.device >= 0) op.ready = gpu::record_ready(r.device, tensor->stream);
    if (tensor->name != nullptr && tensor->name[0] != '\0') r.name = tensor->name;
  }
  if (kind == OpKind::kAllreduce || kind == OpKind::kReducescatter) check_reduction(kind, o, r);
  if (kind == OpKind::kAllreduce) resolve_compression(engine.settings(), o, r);
  // Join is the job's: it takes no process set.
  r.process_set = kind == OpKind::kJoin ? kGlobalProcessSet : o.process_set;
  const std::vector<int32_t> members = process_set_members(engine, kind, r.process_set);
  const int size = engine.identity().size;
  if (kind == OpKind::kBroadcast) {
    // A job rank, as in Horovod, whatever the process set.
    if (o.root_rank < 0 || o.root_rank >= size) {
      invalid(kind, "root_rank " + std::to_string(o.root_rank) + " is outside 0.." +
                        std::to_string(size - 1));
    }
    if (member_index(members, o.root_rank) < 0) {
      invalid(kind, "root_rank " + std::to_string(o.root_rank) +
                        " is not a member of process set " + std::to_string(r.process_set) +
                        " (ranks " + members_text(members) + ")");
    }
    r.root = o.root_rank;
  }
  if (kind == OpKind::kAlltoall) resolve_splits(o, static_cast<int>(members.size()), r);
  if (kind == OpKind::kJoin) r.name = kJoinName;
  if (r.name.empty()) r.name = engine.unnamed(kind, r.process_set);
  return op;
}

Operation make_add_process_set(Engine& engine, const int* ranks, int count) {
  const OpKind kind = OpKind::kAddProcessSet;
  if (count < 1) invalid(kind, "count " + std::to_string(count) + ": a process set needs a rank");
  if (ranks == nullptr) invalid(kind, "ranks is NULL");
  Operation op;
  OpRequest& r = op.request;
  r.kind = kind;
  r.members.assign(ranks, ranks + count);
  std::sort(r.members.begin(), r.members.end());
  const std::string wrong = check_members(r.members, engine.identity().size);
  if (!wrong.empty()) invalid(kind, wrong);
  r.name = engine.unnamed(kind, kGlobalProcessSet);
  return op;
}

Operation make_remove_process_set(Engine& engine, int id) {
  const OpKind kind = OpKind::kRemoveProcessSet;
  if (id == kGlobalProcessSet) invalid(kind, "the global process set 0 cannot be removed");
  if (id < 0) invalid(kind, "process_set " + std::to_string(id) + " is not a process set id");
  if (!engine.process_sets().members(id)) invalid(kind, engine.process_sets().unknown(id));
  Operation op;
  op.request.kind = kind;
  op.request.removed_set = id;
  op.request.name = engine.unnamed(kind, kGlobalProcessSet);
  return op;
}

}  // namespace threelc::engine
