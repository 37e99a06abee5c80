// Element types and reductions of the engine. Their one list is the C ABI's: threelc_dtype
// (threelc/codec.h) and threelc_reduce_op (threelc/threelc.h). Every enumerator below takes its
// value from there, and kElementTypes is the one table of the types' names and sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "threelc/threelc.h"

namespace threelc::engine {

// The C enums again as scoped C++ enums: a type of their own that the engine's functions take
// (no int converts to one by accident), one byte in negotiation messages, and switches that
// -Wswitch checks for a missing type.
enum class ElementType : uint8_t {
  kUint8 = THREELC_UINT8,
  kInt8 = THREELC_INT8,
  kInt32 = THREELC_INT32,
  kInt64 = THREELC_INT64,
  kFloat16 = THREELC_FLOAT16,
  kBFloat16 = THREELC_BFLOAT16,
  kFloat32 = THREELC_FLOAT32,
  kFloat64 = THREELC_FLOAT64,
  kInt16 = THREELC_INT16,
  kBool = THREELC_BOOL,
};

struct ElementTypeInfo {
  ElementType type;
  uint8_t size;  // bytes
  bool floating;
  const char* name;  // as the Python package and messages spell it
};

// Every element type, at the index of its value.
inline constexpr ElementTypeInfo kElementTypes[] = {
    {ElementType::kUint8, 1, false, "uint8"},    {ElementType::kInt8, 1, false, "int8"},
    {ElementType::kInt32, 4, false, "int32"},    {ElementType::kInt64, 8, false, "int64"},
    {ElementType::kFloat16, 2, true, "float16"}, {ElementType::kBFloat16, 2, true, "bfloat16"},
    {ElementType::kFloat32, 4, true, "float32"}, {ElementType::kFloat64, 8, true, "float64"},
    {ElementType::kInt16, 2, false, "int16"},    {ElementType::kBool, 1, false, "bool"},
};
constexpr int kElementTypeCount = static_cast<int>(std::size(kElementTypes));

constexpr bool element_types_in_order() {
  for (int i = 0; i < kElementTypeCount; ++i) {
    if (static_cast<int>(kElementTypes[i].type) != i) return false;
  }
  return true;
}
static_assert(element_types_in_order(), "kElementTypes[i] must describe the type of value i");
static_assert(kElementTypeCount == THREELC_BOOL + 1, "kElementTypes must list every dtype");

enum class ReduceOp : uint8_t {
  kSum = THREELC_OP_SUM,
  kAverage = THREELC_OP_AVERAGE,
  kMin = THREELC_OP_MIN,
  kMax = THREELC_OP_MAX,
  kProduct = THREELC_OP_PRODUCT,
};

// Every reduction's name, at the index of its value.
inline constexpr const char* kReduceOpNames[] = {"sum", "average", "min", "max", "product"};
constexpr int kReduceOpCount = static_cast<int>(std::size(kReduceOpNames));
static_assert(kReduceOpCount == THREELC_OP_PRODUCT + 1, "kReduceOpNames must name every op");

// 0 for a value outside the list.
constexpr size_t element_size(ElementType t) {
  const auto i = static_cast<size_t>(t);
  return i < std::size(kElementTypes) ? kElementTypes[i].size : 0;
}

constexpr bool is_floating(ElementType t) {
  const auto i = static_cast<size_t>(t);
  return i < std::size(kElementTypes) && kElementTypes[i].floating;
}

const char* element_type_name(ElementType t);  // "uint8", ..., "bool"; "unknown"
const char* reduce_op_name(ReduceOp op);       // "sum", "average", "min", "max", "product"

}  // namespace threelc::engine
