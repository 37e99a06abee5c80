// The names of element types and reductions, from element_type.h's tables.
#include "element_type.h"

namespace threelc::engine {

const char* element_type_name(ElementType t) {
  const auto i = static_cast<size_t>(t);
  return i < std::size(kElementTypes) ? kElementTypes[i].name : "unknown";
}

const char* reduce_op_name(ReduceOp op) {
  const auto i = static_cast<size_t>(op);
  return i < std::size(kReduceOpNames) ? kReduceOpNames[i] : "unknown";
}

}  // namespace threelc::engine
