// The CUDA kernels zero-run encode and expand a tile in parallel by the per-position rules of
// compression/src/cuda/tile_rules.h (a max-scan, a sum-scan, then independent writes). This
// test runs those very rules on the host, with the scans done serially, and checks them against
// the CPU's reference encoder and expander on random and adversarial tiles, so that the
// formulas are tested on machines without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/tile_rules.h"
#include "kernels.h"
#include "threelc/compression/block_format.h"

namespace threelc::compression {
namespace {

using Bytes = std::vector<uint8_t>;

// The kernels' encode of g groups: scans serially, then every position writes its bytes.
Bytes encode_by_rules(const Bytes& groups) {
  const int g = static_cast<int>(groups.size());
  std::vector<int> last_literal(groups.size());
  std::vector<int> offset(groups.size());
  int running_max = -1;
  int running_sum = 0;
  for (int j = 0; j < g; ++j) {
    running_max = std::max(running_max, cuda::rules::literal_index(groups.data(), j));
    last_literal[j] = running_max;
    offset[j] = running_sum;
    running_sum += cuda::rules::encoded_bytes_at(groups.data(), g, j, last_literal[j]);
  }
  Bytes out(static_cast<size_t>(running_sum));
  for (int j = g - 1; j >= 0; --j) {  // any order: positions write disjoint bytes
    cuda::rules::write_encoded_at(groups.data(), g, j, last_literal[j], out.data(), offset[j]);
  }
  return out;
}

// The kernels' expand of encoded bytes into g groups.
Bytes expand_by_rules(const Bytes& encoded, size_t g) {
  Bytes groups(g, 0xEE);  // a value no rule writes: a gap would show
  int first = 0;
  std::vector<int> firsts(encoded.size());
  for (size_t p = 0; p < encoded.size(); ++p) {
    firsts[p] = first;
    first += cuda::rules::expanded_groups_of(encoded[p]);
  }
  EXPECT_EQ(static_cast<size_t>(first), g);
  if (static_cast<size_t>(first) != g) return groups;
  for (size_t p = encoded.size(); p-- > 0;) {
    cuda::rules::write_expanded_at(encoded[p], groups.data(), firsts[p]);
  }
  return groups;
}

Bytes encode_by_reference(const Bytes& groups) {
  Bytes out(groups.size() + 1);
  const size_t length =
      detail::kernels_for(Isa::kScalar).zero_run_encode(groups.data(), groups.size(), out.data());
  out.resize(length);
  return out;
}

void expect_rules_match_reference(const Bytes& groups, const std::string& what) {
  const Bytes expected = encode_by_reference(groups);
  const Bytes encoded = encode_by_rules(groups);
  ASSERT_EQ(encoded, expected) << what;
  EXPECT_EQ(expand_by_rules(encoded, groups.size()), groups) << what;
}

// A tile of g groups where a group is the zero group with probability p, else a random literal.
Bytes random_groups(std::mt19937& rng, size_t g, double p) {
  std::bernoulli_distribution zero(p);
  std::uniform_int_distribution<int> literal(0, 241);  // 0..242 without 121
  Bytes groups(g);
  for (uint8_t& b : groups) {
    const int v = literal(rng);
    b = zero(rng) ? kZeroGroup : static_cast<uint8_t>(v >= kZeroGroup ? v + 1 : v);
  }
  return groups;
}

TEST(CudaTileRules, MatchTheReferenceOnRandomTiles) {
  std::mt19937 rng(7);
  for (size_t g : {size_t{1}, size_t{2}, size_t{13}, size_t{255}, size_t{4095}, kGroupsPerTile}) {
    for (double p : {0.0, 0.3, 0.9, 0.99, 1.0}) {
      for (int round = 0; round < 4; ++round) {
        expect_rules_match_reference(random_groups(rng, g, p),
                                     "g=" + std::to_string(g) + " p=" + std::to_string(p));
      }
    }
  }
}

// Runs of every length 1..60 (across the 14-group boundaries) at the start, the middle and the
// end of a tile, and between single literals.
TEST(CudaTileRules, MatchTheReferenceOnEveryRunLength) {
  for (size_t run = 1; run <= 60; ++run) {
    for (size_t at : {size_t{0}, size_t{100}, kGroupsPerTile - run}) {
      Bytes groups(kGroupsPerTile, 7);
      for (size_t j = at; j < at + run; ++j) groups[j] = kZeroGroup;
      expect_rules_match_reference(groups,
                                   "run " + std::to_string(run) + " at " + std::to_string(at));
    }
    Bytes alternating;
    while (alternating.size() + run + 1 <= kGroupsPerTile) {
      alternating.insert(alternating.end(), run, kZeroGroup);
      alternating.push_back(242);
    }
    expect_rules_match_reference(alternating, "alternating runs of " + std::to_string(run));
  }
}

// Bytes that expand to many groups (255: 14, 254: 13) and literals equal to the run bytes'
// neighbours (0, 120, 122, 242) are kept apart correctly.
TEST(CudaTileRules, ExpandedGroupsOfEveryByte) {
  for (int b = 0; b < 256; ++b) {
    const int expected = b < kFirstRunByte ? 1 : b - 241;
    EXPECT_EQ(cuda::rules::expanded_groups_of(static_cast<uint8_t>(b)), expected) << b;
  }
  EXPECT_EQ(cuda::rules::run_bytes(1), 1);
  EXPECT_EQ(cuda::rules::run_bytes(13), 1);
  EXPECT_EQ(cuda::rules::run_bytes(14), 1);
  EXPECT_EQ(cuda::rules::run_bytes(15), 2);
  EXPECT_EQ(cuda::rules::run_bytes(28), 2);
  EXPECT_EQ(cuda::rules::run_bytes(kGroupsPerTile), 293);
}

}  // namespace
}  // namespace threelc::compression
