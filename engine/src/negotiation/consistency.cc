#include "negotiation/consistency.h"

#include <charconv>
#include <functional>
#include <map>
#include <sstream>

#include "negotiation/process_sets.h"
#include "observe/stall_inspector.h"

namespace threelc::engine {

namespace {

std::string dims(const std::vector<int64_t>& v, size_t from) {
  std::ostringstream out;
  out << '[';
  for (size_t i = from; i < v.size(); ++i) out << (i > from ? ", " : "") << v[i];
  out << ']';
  return out.str();
}

// The shortest text that reads back as exactly `v`: values that differ never print alike.
template <typename T>
std::string exact(T v) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

struct Field {
  const char* name;
  std::function<std::string(const OpRequest&)> key;
};

std::vector<Field> fields_of(OpKind kind) {
  std::vector<Field> f = {
      {"operation", [](const OpRequest& r) { return std::string(op_kind_name(r.kind)); }},
      {"dtype", [](const OpRequest& r) { return std::string(element_type_name(r.dtype)); }},
  };
  if (kind == OpKind::kAllgather || kind == OpKind::kAlltoall) {
    f.push_back({"shape after the first dimension", [](const OpRequest& r) {
                   return std::to_string(r.shape.size()) + "-d " + dims(r.shape, 1);
                 }});
  } else {
    f.push_back({"shape", [](const OpRequest& r) { return dims(r.shape, 0); }});
  }
  if (kind == OpKind::kAllreduce || kind == OpKind::kReducescatter) {
    f.push_back(
        {"reduce op", [](const OpRequest& r) { return std::string(reduce_op_name(r.op)); }});
    f.push_back({"prescale/postscale",
                 [](const OpRequest& r) { return exact(r.prescale) + '/' + exact(r.postscale); }});
  }
  if (kind == OpKind::kAllreduce) {
    f.push_back({"compression", [](const OpRequest& r) {
                   return r.compress ? "3lc s=" + exact(r.sparsity) : std::string("none");
                 }});
  }
  if (kind == OpKind::kBroadcast) {
    f.push_back({"root rank", [](const OpRequest& r) { return std::to_string(r.root); }});
  }
  if (kind == OpKind::kAddProcessSet) {
    f.push_back({"the new process set's ranks",
                 [](const OpRequest& r) { return members_text(r.members); }});
  }
  if (kind == OpKind::kRemoveProcessSet) {
    f.push_back({"the process set to remove",
                 [](const OpRequest& r) { return std::to_string(r.removed_set); }});
  }
  // Host or CUDA; the ordinal may differ between ranks (each process its own GPU).
  f.push_back({"device", [](const OpRequest& r) {
                 return r.device < 0 ? std::string("cpu") : std::string("cuda");
               }});
  return f;
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) { return compact_ranks(ranks); }

std::optional<std::string> check_consistency(const std::string& name,
                                             const std::vector<std::optional<OpRequest>>& by_rank) {
  const OpRequest* first = nullptr;
  for (const auto& r : by_rank) {
    if (r && !first) first = &*r;
  }
  if (!first) return std::nullopt;
  std::ostringstream message;
  bool differs = false;
  // The kind decides which fields matter; if kinds differ only that is reported.
  for (const Field& field : fields_of(first->kind)) {
    std::map<std::string, std::vector<int>> ranks_by_value;
    for (size_t rank = 0; rank < by_rank.size(); ++rank) {
      if (by_rank[rank])
        ranks_by_value[field.key(*by_rank[rank])].push_back(static_cast<int>(rank));
    }
    if (ranks_by_value.size() <= 1) continue;
    message << (differs ? "; and on " : "tensor '" + name + "': ranks disagree on ") << field.name
            << ':';
    bool first_group = true;
    for (const auto& [value, ranks] : ranks_by_value) {
      message << (first_group ? " " : "; ") << ranks_text(ranks) << " sent " << value;
      first_group = false;
    }
    differs = true;
    if (std::string(field.name) == "operation") break;
  }
  if (!differs) return std::nullopt;
  return message.str();
}

}  // namespace threelc::engine
