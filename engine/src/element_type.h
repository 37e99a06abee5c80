// Element types and reductions of the engine, numbered as the C ABI's threelc_dtype and
// threelc_reduce_op (threelc/threelc.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace threelc::engine {

enum class ElementType : uint8_t {
  kUint8 = 0,
  kInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
};
constexpr int kElementTypeCount = 8;

enum class ReduceOp : uint8_t { kSum = 0, kAverage = 1, kMin = 2, kMax = 3, kProduct = 4 };
constexpr int kReduceOpCount = 5;

constexpr size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::kUint8:
    case ElementType::kInt8:
      return 1;
    case ElementType::kFloat16:
    case ElementType::kBFloat16:
      return 2;
    case ElementType::kInt32:
    case ElementType::kFloat32:
      return 4;
    case ElementType::kInt64:
    case ElementType::kFloat64:
      return 8;
  }
  return 0;
}

constexpr bool is_floating(ElementType t) {
  return t == ElementType::kFloat16 || t == ElementType::kBFloat16 || t == ElementType::kFloat32 ||
         t == ElementType::kFloat64;
}

const char* element_type_name(ElementType t);  // "uint8", ..., "float64"
const char* reduce_op_name(ReduceOp op);       // "sum", "average", "min", "max", "product"

}  // namespace threelc::engine
