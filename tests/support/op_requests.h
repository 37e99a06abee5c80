// Building engine OpRequests in the negotiation tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "element_type.h"
#include "runtime/operation.h"

namespace threelc::test_support {

// A request for tensor `name` with every field not named here at its default.
inline engine::OpRequest op_request(const std::string& name,
                                    engine::OpKind kind = engine::OpKind::kAllreduce,
                                    std::vector<int64_t> shape = {4},
                                    engine::ElementType dtype = engine::ElementType::kFloat32) {
  engine::OpRequest r;
  r.name = name;
  r.kind = kind;
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

}  // namespace threelc::test_support
