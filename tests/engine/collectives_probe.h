// What the collectives probe's cases share (collectives_probe.cc, collectives_probe_moves.cc):
// inputs every rank can compute for every rank, hashes of outputs, the element types and ops
// checked, and an observer that tallies bytes per phase.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/allgather.h"
#include "collectives/alltoall.h"
#include "collectives/broadcast.h"
#include "collectives/push_pull.h"
#include "collectives/raw_allreduce.h"
#include "collectives/reduce_ops.h"
#include "collectives/reducescatter.h"
#include "collectives/ring_allreduce.h"
#include "element_type.h"
#include "error_feedback.h"
#include "probe_support.h"
#include "threelc/transport/transport.h"

namespace collectives_probe {

namespace te = threelc::engine;
namespace tt = threelc::transport;
namespace ts = threelc::test_support;

using Bytes = std::vector<std::byte>;

// A mismatch: the probe prints it and exits 2.
struct Mismatch {
  std::string what;
};

inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t noise(uint64_t salt, int rank, size_t i) {
  return mix(mix(salt) ^ (static_cast<uint64_t>(rank) << 48) ^ i);
}

inline void print_hash(const std::string& name, std::span<const std::byte> bytes) {
  std::printf("HASH %s %016llx\n", name.c_str(), static_cast<unsigned long long>(ts::fnv1a(bytes)));
}

inline void expect_bytes(const std::string& name, std::span<const std::byte> got,
                         std::span<const std::byte> want) {
  if (got.size() != want.size()) {
    throw Mismatch{name + ": " + std::to_string(got.size()) + " bytes, expected " +
                   std::to_string(want.size())};
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      throw Mismatch{name + ": byte " + std::to_string(i) + " is " +
                     std::to_string(static_cast<int>(got[i])) + ", expected " +
                     std::to_string(static_cast<int>(want[i]))};
    }
  }
}

template <typename T>
inline void put(Bytes& out, size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

// `count` values of `type` for `rank`: random integers (sums and products wrap), floats of
// [-15.6, 15.6] in steps of 1/64 with a NaN, inf or -inf here and there.
inline Bytes values(te::ElementType type, uint64_t salt, int rank, size_t count) {
  Bytes out(count * te::element_size(type));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = noise(salt, rank, i);
    double v = static_cast<double>(static_cast<int64_t>(h % 2001) - 1000) / 64.0;
    if (h % 211 == 0) v = std::nan("");
    if (h % 223 == 0) v = INFINITY;
    if (h % 227 == 0) v = -INFINITY;
    const auto f = static_cast<float>(v);
    switch (type) {
      case te::ElementType::kUint8:
      case te::ElementType::kInt8:
        put(out, i, static_cast<uint8_t>(h >> 7));
        break;
      case te::ElementType::kBool:  // moved only (kTypes, the reduced types, leave it out)
        put(out, i, static_cast<uint8_t>((h >> 7) & 1));
        break;
      case te::ElementType::kInt16:
        put(out, i, static_cast<uint16_t>(h >> 5));
        break;
      case te::ElementType::kInt32:
        put(out, i, static_cast<uint32_t>(h >> 3));
        break;
      case te::ElementType::kInt64:
        put(out, i, h);
        break;
      case te::ElementType::kFloat16:
        put(out, i, te::float_to_half(f));
        break;
      case te::ElementType::kBFloat16:
        put(out, i, te::float_to_bfloat16(f));
        break;
      case te::ElementType::kFloat32:
        put(out, i, f);
        break;
      case te::ElementType::kFloat64:
        put(out, i, v);
        break;
    }
  }
  return out;
}

constexpr te::ElementType kTypes[] = {
    te::ElementType::kUint8,   te::ElementType::kInt8,    te::ElementType::kInt32,
    te::ElementType::kInt64,   te::ElementType::kFloat16, te::ElementType::kBFloat16,
    te::ElementType::kFloat32, te::ElementType::kFloat64, te::ElementType::kInt16};
constexpr te::ReduceOp kOps[] = {te::ReduceOp::kSum, te::ReduceOp::kAverage, te::ReduceOp::kMin,
                                 te::ReduceOp::kMax, te::ReduceOp::kProduct};

inline std::vector<te::TensorSlice> layout(const std::string& prefix,
                                           const std::vector<size_t>& sizes) {
  std::vector<te::TensorSlice> tensors;
  size_t offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    tensors.push_back({prefix + "/t" + std::to_string(t), offset, sizes[t]});
    offset += sizes[t];
  }
  return tensors;
}

// Counts the bytes of every phase.
class Tally : public te::CollectiveObserver {
 public:
  void record(const te::PhaseEvent& e) override {
    const auto p = static_cast<size_t>(e.phase);
    bytes[p] += e.bytes;
    ++events[p];
    if (e.end_ns < e.begin_ns) bad = true;
    max_tensor = std::max(max_tensor, e.tensor);
    if ((e.phase == te::Phase::kSend || e.phase == te::Phase::kReceive) && e.peer < 0) bad = true;
  }
  size_t bytes[6] = {};
  size_t events[6] = {};
  size_t max_tensor = 0;
  bool bad = false;
};

inline size_t phase_bytes(const Tally& t, te::Phase p) { return t.bytes[static_cast<size_t>(p)]; }

// The cases of the collectives that move bytes (collectives_probe_moves.cc).
void broadcast_cases(tt::Context& ctx);
void allgather_cases(tt::Context& ctx);
void reducescatter_case(tt::Context& ctx, te::ElementType type, te::ReduceOp op,
                        size_t chunk_bytes);
void alltoall_cases(tt::Context& ctx);

}  // namespace collectives_probe
