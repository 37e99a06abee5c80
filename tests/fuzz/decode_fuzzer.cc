// libFuzzer target: arbitrary bytes as a 3LC / raw block into validate, decode and decode_add.
//
// Properties checked on every input (a violation aborts, so libFuzzer reports a crash):
//   - nothing reads or writes out of bounds (ASan: the destination is a heap buffer of exactly
//     the expected count);
//   - validate, decode and decode_add agree on accepting the block, with either the header's
//     count (bounded to kMaxValues) or a fixed expected count;
//   - a refused block leaves the destination untouched;
//   - every ISA this CPU runs decodes the same bits, and a 3LC block decodes to {0, +-scale}
//     (format v2: +-the scale of the value's tile, from the block's scale table);
//   - decode_add with alpha = 1 onto zeros equals decode (for finite values).
//
// Build and run: tests/fuzz/run_decode_fuzzer.sh OUT_DIR [SECONDS].
// Seeds: tests/fuzz/corpus/decode/, written once by tests/fuzz/make_seed_corpus.py (valid 3LC
// v1 blocks of 0, 1, 7, 20480 + 7 values, v2 blocks with tiles of 5 to 20480 values, raw blocks,
// and one of each malformed class). libFuzzer mutates them; to grow the corpus, run the fuzzer
// on a copy with -merge=1 and commit only small files (the corpus is meant for quick coverage of
// every validation branch, not for bulk).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"

namespace {

namespace tc = threelc::compression;

constexpr size_t kMaxValues = size_t{1} << 20;
// Fixed receiver counts: a one-value block, a short tile, a partial second tile.
constexpr size_t kFixedCounts[] = {1, 7, tc::kTileValues + 7};
constexpr uint32_t kSentinelBits = 0x7FA5A5A5u;  // a signalling-NaN pattern no decode writes

void check(bool condition) {
  if (!condition) std::abort();
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

bool all_sentinel(const float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (bits_of(p[i]) != kSentinelBits) return false;
  }
  return true;
}

std::vector<float> sentinel_vector(size_t n) {
  std::vector<float> v(n);
  for (float& f : v) std::memcpy(&f, &kSentinelBits, sizeof f);
  return v;
}

// The scale that value i of a valid 3LC block decodes with: the header's (v1) or its tile's.
float value_scale(std::span<const uint8_t> block, const tc::BlockInfo& info, size_t i) {
  if (info.format != tc::Format::kThreeLCTiled) return info.scale;
  const size_t tiles = tc::tile_count(info.count, info.tile_values);
  float scale;
  std::memcpy(&scale,
              block.data() + tc::kHeaderBytes + tiles * tc::kTileLengthBytes +
                  (i / info.tile_values) * tc::kTileScaleBytes,
              sizeof scale);
  return scale;
}

void exercise(std::span<const uint8_t> block, size_t expected, const std::vector<tc::Isa>& isas) {
  tc::BlockInfo info;
  const bool valid = tc::validate(block, expected, &info).ok();
  if (!valid) {
    // Validation does not depend on the ISA: one destination, refused by both entry points.
    // Exactly `expected` floats on the heap: one past the end is an ASan report.
    std::vector<float> dst = sentinel_vector(expected);
    const tc::Status decoded = tc::decode(block, expected, dst.data());
    const tc::Status added = tc::decode_add(block, expected, 0.5f, dst.data());
    check(!decoded.ok() && !added.ok());
    check(!decoded.message().empty() && decoded.message() == added.message());
    check(all_sentinel(dst.data(), expected));
    return;
  }
  check(info.count == expected);
  std::vector<float> reference;
  for (tc::Isa isa : isas) {
    std::vector<float> dst = sentinel_vector(expected);
    check(tc::decode(block, expected, dst.data(), {isa}).ok());
    std::vector<float> acc(expected, 0.0f);
    check(tc::decode_add(block, expected, 1.0f, acc.data(), {isa}).ok());
    for (size_t i = 0; i < expected; ++i) {
      if (info.format != tc::Format::kRaw) {
        const float d = dst[i];
        const float scale = value_scale(block, info, i);
        check(d == 0.0f || d == scale || d == -scale);
        check(acc[i] == d);
      } else if (std::isfinite(dst[i])) {
        check(acc[i] == dst[i]);
      }
    }
    if (reference.empty()) {
      reference = std::move(dst);
    } else {
      check(std::memcmp(reference.data(), dst.data(), expected * sizeof(float)) == 0);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<tc::Isa> isas = tc::supported_isas();
  const std::span<const uint8_t> block(data, size);

  tc::BlockInfo info;
  const tc::Status any = tc::validate(block, tc::kAnyCount, &info);
  if (!any.ok()) check(!any.message().empty());
  // The header's own count (when it parses), bounded so that a hostile count cannot make the
  // harness allocate gigabytes.
  if (any.ok() && info.count <= kMaxValues) exercise(block, info.count, isas);
  for (size_t expected : kFixedCounts) {
    exercise(block, expected, isas);
    if (expected != info.count || !any.ok()) {
      check(!tc::validate(block, expected, nullptr).ok());
    }
  }
  return 0;
}
