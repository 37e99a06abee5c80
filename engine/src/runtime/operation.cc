#include "runtime/operation.h"

#include <sstream>

namespace threelc::engine {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce:
      return "allreduce";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kAllgather:
      return "allgather";
    case OpKind::kReducescatter:
      return "reducescatter";
    case OpKind::kAlltoall:
      return "alltoall";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kJoin:
      return "join";
    case OpKind::kAddProcessSet:
      return "add_process_set";
    case OpKind::kRemoveProcessSet:
      return "remove_process_set";
  }
  return "unknown";
}

size_t OpRequest::element_count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

size_t OpRequest::row_elements() const {
  size_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

std::string describe(const OpRequest& r) {
  std::ostringstream out;
  out << op_kind_name(r.kind);
  if (r.kind == OpKind::kAddProcessSet) {
    out << " of ranks [";
    for (size_t i = 0; i < r.members.size(); ++i) out << (i ? ", " : "") << r.members[i];
    out << ']';
    return out.str();
  }
  if (r.kind == OpKind::kRemoveProcessSet) {
    out << ' ' << r.removed_set;
    return out.str();
  }
  if (r.kind == OpKind::kBarrier || r.kind == OpKind::kJoin) return out.str();
  out << ' ' << element_type_name(r.dtype) << " [";
  for (size_t i = 0; i < r.shape.size(); ++i) out << (i ? ", " : "") << r.shape[i];
  out << ']';
  if (r.kind == OpKind::kAllreduce || r.kind == OpKind::kReducescatter) {
    out << ' ' << reduce_op_name(r.op);
    if (r.prescale != 1.0) out << " prescale " << r.prescale;
    if (r.postscale != 1.0) out << " postscale " << r.postscale;
  }
  if (r.kind == OpKind::kAllreduce) {
    if (r.compress) {
      out << " 3lc s=" << r.sparsity;
    } else {
      out << " uncompressed";
    }
  }
  if (r.kind == OpKind::kBroadcast) out << " root " << r.root;
  if (r.kind == OpKind::kAlltoall) {
    out << " splits [";
    for (size_t i = 0; i < r.splits.size(); ++i) out << (i ? ", " : "") << r.splits[i];
    out << ']';
  }
  return out.str();
}

std::string quoted(const OpKey& key) {
  std::string out = "'" + key.name + "'";
  if (key.process_set != kGlobalProcessSet) {
    out += " (process set " + std::to_string(key.process_set) + ")";
  }
  return out;
}

bool negotiated_globally(OpKind kind) {
  return kind == OpKind::kJoin || kind == OpKind::kAddProcessSet ||
         kind == OpKind::kRemoveProcessSet;
}

}  // namespace threelc::engine
