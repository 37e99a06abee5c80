#include "negotiation/fusion.h"

namespace threelc::engine {

namespace {

bool fusable(const Response& r) {
  return r.type == ResponseType::kRun && r.kind == OpKind::kAllreduce && r.tensors.size() == 1;
}

bool same_group(const OpRequest& a, const OpRequest& b) {
  return a.dtype == b.dtype && a.op == b.op && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.compress == b.compress && a.sparsity == b.sparsity &&
         a.device == b.device && a.process_set == b.process_set;
}

}  // namespace

size_t fused_bytes(const OpRequest& request) {
  return request.compress ? request.element_count() * sizeof(float) : request.bytes();
}

std::vector<Response> fuse(std::vector<Response> ready, size_t threshold) {
  std::vector<Response> out;
  std::vector<size_t> open;  // indices into `out` of groups that may still grow
  std::vector<size_t> open_bytes;
  for (Response& r : ready) {
    if (!fusable(r) || threshold == 0) {
      out.push_back(std::move(r));
      continue;
    }
    const size_t bytes = fused_bytes(r.tensors[0]);
    bool placed = false;
    for (size_t g = 0; g < open.size() && !placed; ++g) {
      Response& group = out[open[g]];
      if (same_group(group.tensors[0], r.tensors[0]) && group.joined_ranks == r.joined_ranks &&
          open_bytes[g] + bytes <= threshold) {
        group.tensors.push_back(std::move(r.tensors[0]));
        open_bytes[g] += bytes;
        placed = true;
      }
    }
    if (placed) continue;
    out.push_back(std::move(r));
    if (bytes < threshold) {
      open.push_back(out.size() - 1);
      open_bytes.push_back(bytes);
    }
  }
  return out;
}

}  // namespace threelc::engine
