// What the coordinator tests share: single-tensor responses, the layout of a cycle's responses
// ("a+b" for a fused group), the Coordinator's options, and one cycle of every rank's
// submissions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "negotiation/consistency.h"
#include "negotiation/coordinator.h"
#include "negotiation/fusion.h"
#include "negotiation/messages.h"
#include "negotiation/wire.h"
#include "op_requests.h"
#include "runtime/operation.h"
#include "threelc/threelc.h"

namespace coordinator_test {

namespace te = threelc::engine;
using namespace std::chrono_literals;
using Clock = te::Coordinator::Clock;
using Requests = std::vector<std::optional<te::OpRequest>>;

inline constexpr Clock::time_point t0{};

using threelc::test_support::op_request;

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline te::Response single(const std::string& name, int64_t elements,
                           te::ElementType dtype = te::ElementType::kFloat32,
                           te::OpKind kind = te::OpKind::kAllreduce) {
  te::Response r;
  r.kind = kind;
  r.tensors = {op_request(name, kind, {elements}, dtype)};
  return r;
}

// The names of each response's tensors, "a+b" for a fused group.
inline std::vector<std::string> layout(const std::vector<te::Response>& responses) {
  std::vector<std::string> out;
  for (const auto& r : responses) {
    std::string names;
    for (const auto& t : r.tensors) names += (names.empty() ? "" : "+") + t.name;
    out.push_back(names);
  }
  return out;
}

using Names = std::vector<std::string>;

inline te::Coordinator::Options options(int size, size_t fusion = 0,
                                        Clock::duration stall = Clock::duration::zero()) {
  te::Coordinator::Options o = te::Coordinator::Options::from(te::EngineSettings(), size);
  o.fusion_threshold = fusion;
  o.stall_warning = stall;
  return o;
}

inline std::vector<std::string> names_of(const te::CycleResponse& m) { return layout(m.responses); }

// One cycle: every rank's submissions in rank order, then the response.
inline te::CycleResponse cycle(te::Coordinator& c,
                               const std::vector<std::vector<te::OpRequest>>& by_rank,
                               Clock::time_point now = t0) {
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    c.add(static_cast<int>(rank), by_rank[rank], false, now);
  }
  return c.respond(now);
}

}  // namespace coordinator_test
