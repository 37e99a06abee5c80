#include "collectives/reduce_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "threelc/compression/float16_arrays.h"

namespace threelc::engine {

namespace {

// How one ElementType is stored and in which type its arithmetic happens.
template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static T widen(T v) { return v; }
  static T narrow(T v) { return v; }
};

struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static float widen(uint16_t v) { return half_to_float(v); }
  static uint16_t narrow(float v) { return float_to_half(v); }
};

struct BFloat {
  using Storage = uint16_t;
  using Compute = float;
  static float widen(uint16_t v) { return bfloat16_to_float(v); }
  static uint16_t narrow(float v) { return float_to_bfloat16(v); }
};

[[noreturn]] void bad_type(const char* function, ElementType type) {
  throw std::invalid_argument(std::string(function) + ": no reduction of element type " +
                              element_type_name(type) + " (" +
                              std::to_string(static_cast<int>(type)) + ")");
}

[[noreturn]] void bad_op(const char* function, ReduceOp op) {
  throw std::invalid_argument(std::string(function) + ": unknown reduce op " +
                              std::to_string(static_cast<int>(op)));
}

// Calls f(Traits{}) for the traits of `type`.
template <typename F>
void with_traits(const char* function, ElementType type, F&& f) {
  switch (type) {
    case ElementType::kUint8:
      return f(Native<uint8_t>{});
    case ElementType::kInt8:
      return f(Native<int8_t>{});
    case ElementType::kInt16:
      return f(Native<int16_t>{});
    case ElementType::kInt32:
      return f(Native<int32_t>{});
    case ElementType::kInt64:
      return f(Native<int64_t>{});
    case ElementType::kFloat16:
      return f(Half{});
    case ElementType::kBFloat16:
      return f(BFloat{});
    case ElementType::kFloat32:
      return f(Native<float>{});
    case ElementType::kFloat64:
      return f(Native<double>{});
    case ElementType::kBool:  // moved, never reduced: submissions refuse it (api/requests.cc)
      break;
  }
  bad_type(function, type);
}

template <typename T>
T load(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(void* base, size_t i, T v) {
  std::memcpy(static_cast<std::byte*>(base) + i * sizeof(T), &v, sizeof(T));
}

// a op b in the compute type C (kAverage is reduced as kSum by the caller).
template <ReduceOp kOp, typename C>
C combine(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (kOp == ReduceOp::kSum) return a + b;
    if constexpr (kOp == ReduceOp::kProduct) return a * b;
    if constexpr (kOp == ReduceOp::kMin) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return b < a ? b : a;
    }
    if constexpr (kOp == ReduceOp::kMax) {
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      return b > a ? b : a;
    }
  } else {
    // Unsigned arithmetic wraps. Operands narrower than int are widened to unsigned int first:
    // promoted to int, uint16 65535 * 65535 would overflow it.
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    if constexpr (kOp == ReduceOp::kSum) {
      return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
    }
    if constexpr (kOp == ReduceOp::kProduct) {
      return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    }
    if constexpr (kOp == ReduceOp::kMin) return b < a ? b : a;
    if constexpr (kOp == ReduceOp::kMax) return b > a ? b : a;
  }
  return a;  // not reached: kAverage is mapped to kSum before
}

// fp16 arrays are converted a block at a time with the CPU's conversion instructions
// (float16_arrays.h: the same bits as Half::widen / narrow) where both are 2-byte aligned.
constexpr size_t kHalfBlock = 256;

bool halves_aligned(const void* a, const void* b) {
  return (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) % alignof(uint16_t) == 0;
}

// Applies f(float* values, size_t n) to `count` fp16 values of `in`, a block at a time, and
// stores them as fp16 in `out` (which may be `in`).
template <typename F>
void transform_halves(const void* in, void* out, size_t count, F&& f) {
  float values[kHalfBlock];
  for (size_t start = 0; start < count; start += kHalfBlock) {
    const size_t n = std::min(kHalfBlock, count - start);
    compression::halves_to_floats(static_cast<const uint16_t*>(in) + start, values, n);
    f(values, start, n);
    compression::floats_to_halves(values, static_cast<uint16_t*>(out) + start, n);
  }
}

template <ReduceOp kOp, typename Traits>
void reduce_loop(void* acc, const void* in, size_t count) {
  using S = typename Traits::Storage;
  if constexpr (std::is_same_v<Traits, Half>) {
    if (halves_aligned(acc, in)) {
      float other[kHalfBlock];
      transform_halves(acc, acc, count, [&](float* values, size_t start, size_t n) {
        compression::halves_to_floats(static_cast<const uint16_t*>(in) + start, other, n);
        for (size_t i = 0; i < n; ++i) values[i] = combine<kOp>(values[i], other[i]);
      });
      return;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const auto a = Traits::widen(load<S>(acc, i));
    const auto b = Traits::widen(load<S>(in, i));
    store<S>(acc, i, Traits::narrow(combine<kOp>(a, b)));
  }
}

// Integer value of `d` truncated toward zero and saturated to T's range (NaN gives 0).
template <typename T>
T saturate(double d) {
  if (std::isnan(d)) return T{0};
  const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);  // max + 1, exact
  const double lower = std::is_signed_v<T> ? -upper : 0.0;               // min, exact
  if (d >= upper) return std::numeric_limits<T>::max();
  if (d <= lower) return std::numeric_limits<T>::min();
  return static_cast<T>(std::trunc(d));
}

}  // namespace

void reduce_into(ElementType type, ReduceOp op, void* acc, const void* in, size_t count) {
  with_traits("reduce_into", type, [&](auto traits) {
    using Traits = decltype(traits);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        return reduce_loop<ReduceOp::kSum, Traits>(acc, in, count);
      case ReduceOp::kProduct:
        return reduce_loop<ReduceOp::kProduct, Traits>(acc, in, count);
      case ReduceOp::kMin:
        return reduce_loop<ReduceOp::kMin, Traits>(acc, in, count);
      case ReduceOp::kMax:
        return reduce_loop<ReduceOp::kMax, Traits>(acc, in, count);
    }
    bad_op("reduce_into", op);
  });
}

void scale_values(ElementType type, void* data, size_t count, double factor) {
  with_traits("scale_values", type, [&](auto traits) {
    using Traits = decltype(traits);
    using S = typename Traits::Storage;
    using C = typename Traits::Compute;
    if (factor == 1.0) return;
    if constexpr (std::is_same_v<Traits, Half>) {
      if (halves_aligned(data, data)) {
        const auto f = static_cast<float>(factor);
        transform_halves(data, data, count, [&](float* values, size_t, size_t n) {
          for (size_t i = 0; i < n; ++i) values[i] = values[i] * f;
        });
        return;
      }
    }
    for (size_t i = 0; i < count; ++i) {
      const C v = Traits::widen(load<S>(data, i));
      if constexpr (std::is_same_v<C, double>) {
        store<S>(data, i, Traits::narrow(v * factor));
      } else if constexpr (std::is_same_v<C, float>) {
        store<S>(data, i, Traits::narrow(v * static_cast<float>(factor)));
      } else {
        store<S>(data, i, saturate<C>(static_cast<double>(v) * factor));
      }
    }
  });
}

void divide_values(ElementType type, void* data, size_t count, int64_t divisor) {
  if (divisor == 0) throw std::invalid_argument("divide_values: division by zero");
  with_traits("divide_values", type, [&](auto traits) {
    using Traits = decltype(traits);
    using S = typename Traits::Storage;
    using C = typename Traits::Compute;
    if constexpr (std::is_same_v<Traits, Half>) {
      if (halves_aligned(data, data)) {
        const auto d = static_cast<float>(divisor);
        transform_halves(data, data, count, [&](float* values, size_t, size_t n) {
          for (size_t i = 0; i < n; ++i) values[i] = values[i] / d;
        });
        return;
      }
    }
    for (size_t i = 0; i < count; ++i) {
      const C v = Traits::widen(load<S>(data, i));
      if constexpr (std::is_floating_point_v<C>) {
        store<S>(data, i, Traits::narrow(v / static_cast<C>(divisor)));
      } else {
        const auto wide = static_cast<int64_t>(v);  // NOLINT(bugprone-signed-char-misuse): int8
        const int64_t q = (wide == std::numeric_limits<int64_t>::min() && divisor == -1)
                              ? wide  // the one quotient int64 cannot hold: wraps to itself
                              : wide / divisor;
        store<S>(data, i, static_cast<C>(q));  // modulo 2^bits where it does not fit
      }
    }
  });
}

void fill_identity(ElementType type, ReduceOp op, void* data, size_t count) {
  with_traits("fill_identity", type, [&](auto traits) {
    using Traits = decltype(traits);
    using S = typename Traits::Storage;
    using C = typename Traits::Compute;
    using Limits = std::numeric_limits<C>;
    C identity{};
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        identity = C{0};
        break;
      case ReduceOp::kProduct:
        identity = C{1};
        break;
      case ReduceOp::kMin:
        if constexpr (Limits::has_infinity) {
          identity = Limits::infinity();
        } else {
          identity = Limits::max();
        }
        break;
      case ReduceOp::kMax:
        if constexpr (Limits::has_infinity) {
          identity = -Limits::infinity();
        } else {
          identity = Limits::lowest();
        }
        break;
      default:
        bad_op("fill_identity", op);
    }
    const S stored = Traits::narrow(identity);
    for (size_t i = 0; i < count; ++i) store<S>(data, i, stored);
  });
}

void to_float32(ElementType type, const void* in, float* out, size_t count) {
  switch (type) {
    case ElementType::kFloat16:
      if (halves_aligned(in, in)) {
        compression::halves_to_floats(static_cast<const uint16_t*>(in), out, count);
        return;
      }
      for (size_t i = 0; i < count; ++i) out[i] = half_to_float(load<uint16_t>(in, i));
      return;
    case ElementType::kBFloat16:
      for (size_t i = 0; i < count; ++i) out[i] = bfloat16_to_float(load<uint16_t>(in, i));
      return;
    case ElementType::kFloat32:
      if (count != 0) std::memmove(out, in, count * sizeof(float));
      return;
    case ElementType::kFloat64:
      for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(load<double>(in, i));
      return;
    default:
      throw std::invalid_argument(std::string("to_float32: ") + element_type_name(type) +
                                  " is not a floating-point type");
  }
}

void from_float32(ElementType type, const float* in, void* out, size_t count) {
  switch (type) {
    case ElementType::kFloat16:
      if (halves_aligned(out, out)) {
        compression::floats_to_halves(in, static_cast<uint16_t*>(out), count);
        return;
      }
      for (size_t i = 0; i < count; ++i) store<uint16_t>(out, i, float_to_half(in[i]));
      return;
    case ElementType::kBFloat16:
      for (size_t i = 0; i < count; ++i) store<uint16_t>(out, i, float_to_bfloat16(in[i]));
      return;
    case ElementType::kFloat32:
      if (count != 0) std::memmove(out, in, count * sizeof(float));
      return;
    case ElementType::kFloat64:
      for (size_t i = 0; i < count; ++i) store<double>(out, i, static_cast<double>(in[i]));
      return;
    default:
      throw std::invalid_argument(std::string("from_float32: ") + element_type_name(type) +
                                  " is not a floating-point type");
  }
}

}  // namespace threelc::engine
