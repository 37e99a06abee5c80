// A randomized mutation loop over valid blocks (v1, v2, raw): nothing crashes; validate and
// decode agree; a refused block leaves the destination untouched, an accepted one decodes to
// 0 or +-its (tile's) scale, the same bits on every ISA.
#include <gtest/gtest.h>

#include "malformed_blocks.h"

namespace threelc::compression::malformed_blocks {
namespace {

std::vector<Bytes> base_blocks() {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<Bytes> blocks = {two_tile_block(), raw_block({}), raw_block({1.0f, -2.0f, 3.0f}),
                               encode_block({})};
  for (size_t n : {1u, 7u, 64u, 20480u + 7u, 45000u}) {
    std::vector<float> x(n);
    for (float& v : x) v = unit(rng) < 0.1f ? normal(rng) : 0.0f;
    blocks.push_back(encode_block(x));
    for (float& v : x) v = normal(rng);
    blocks.push_back(encode_block(x));
  }
  // Format v2: tiles of 5, 40 and 1280 values.
  blocks.push_back(three_tile_block());
  for (const auto& [n, scale_tile] :
       {std::pair{size_t{23}, size_t{5}}, std::pair{size_t{333}, size_t{40}},
        std::pair{size_t{3000}, size_t{1280}}}) {
    std::vector<float> x(n);
    for (float& v : x) v = unit(rng) < 0.1f ? normal(rng) : 0.0f;
    blocks.push_back(encode_block(x, scale_tile));
    for (float& v : x) v = normal(rng) * (unit(rng) < 0.5f ? 100.0f : 0.01f);
    blocks.push_back(encode_block(x, scale_tile));
  }
  std::vector<float> x(50);
  for (float& v : x) v = normal(rng);
  blocks.push_back(raw_block(x));
  return blocks;
}

void mutate(std::mt19937& rng, Bytes& b) {
  static const uint8_t interesting[] = {0, 1, 120, 121, 122, 241, 242, 243, 244, 254, 255};
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 8) {
      case 0:  // flip a bit
        if (!b.empty()) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // an interesting byte anywhere
        if (!b.empty()) b[rng() % b.size()] = interesting[rng() % sizeof interesting];
        break;
      case 2:  // a random byte in the header or tile table
        if (!b.empty()) b[rng() % std::min<size_t>(b.size(), 24)] = static_cast<uint8_t>(rng());
        break;
      case 3:  // truncate
        b.resize(b.empty() ? 0 : rng() % b.size());
        break;
      case 4:  // append
        for (size_t k = 1 + rng() % 3; k > 0; --k) b.push_back(static_cast<uint8_t>(rng()));
        break;
      case 5:  // erase a byte
        if (!b.empty()) b.erase(b.begin() + static_cast<std::ptrdiff_t>(rng() % b.size()));
        break;
      case 6:  // nudge the count or the payload length
        if (b.size() >= kHeaderBytes) {
          const size_t at = rng() % 2 == 0 ? kCountAt : kPayloadAt;
          const int32_t delta = static_cast<int32_t>(rng() % 9) - 4;
          set_u32(b, at, get_u32(b, at) + static_cast<uint32_t>(delta));
        }
        break;
      default:  // nudge a tile length
        if (b.size() >= kTableAt + 2) {
          const int32_t delta = static_cast<int32_t>(rng() % 5) - 2;
          set_u16(b, kTableAt, static_cast<uint16_t>(get_u16(b, kTableAt) + delta));
        }
        break;
    }
  }
}

TEST(Malformed, RandomMutationsNeverCrash) {
  const std::vector<Bytes> bases = base_blocks();
  std::mt19937 rng(777);
  size_t accepted = 0, rejected = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    const Bytes& base = bases[rng() % bases.size()];
    const size_t base_count = get_u32(base, kCountAt);
    Bytes b = base;
    mutate(rng, b);
    SCOPED_TRACE("iteration " + std::to_string(iteration));

    BlockInfo info;
    const Status any = validate(b, kAnyCount, &info);
    const Status fixed = validate(b, base_count, nullptr);
    if (any.ok()) {
      EXPECT_EQ(fixed.ok(), info.count == base_count);
    } else {
      EXPECT_FALSE(fixed.ok());
      EXPECT_FALSE(any.message().empty());
    }
    if (!fixed.ok()) {
      EXPECT_FALSE(fixed.message().empty());
    }

    // Decode with the header's count (bounded) and with the base block's count.
    const size_t counts[] = {any.ok() ? info.count : base_count, base_count};
    for (size_t expected : counts) {
      if (expected > (size_t{1} << 23)) continue;
      std::vector<float> reference;
      for (Isa isa : supported_isas()) {
        std::vector<float> dst(expected, kSentinel);
        const Status d = decode(b, expected, dst.data(), DecodeOptions{isa});
        std::vector<float> acc(expected, kSentinel);
        const Status a = decode_add(b, expected, 1.0f, acc.data(), DecodeOptions{isa});
        ASSERT_EQ(d.ok(), a.ok());
        if (!d.ok()) {
          ASSERT_FALSE(d.message().empty());
          for (float v : dst) ASSERT_EQ(v, kSentinel);
          for (float v : acc) ASSERT_EQ(v, kSentinel);
          continue;
        }
        ASSERT_TRUE(any.ok());
        if (info.format == Format::kThreeLC) {
          for (size_t i = 0; i < expected; ++i) {
            ASSERT_TRUE(dst[i] == 0.0f || dst[i] == info.scale || dst[i] == -info.scale) << i;
          }
        } else if (info.format == Format::kThreeLCTiled) {
          // 0 or +-the scale of the value's tile, from the scale table.
          const size_t tiles = tile_count(info.count, info.tile_values);
          for (size_t i = 0; i < expected; ++i) {
            const float scale =
                std::bit_cast<float>(get_u32(b, kTableAt + 2 * tiles + 4 * (i / info.tile_values)));
            ASSERT_TRUE(dst[i] == 0.0f || std::fabs(dst[i]) == scale) << i;
          }
        }
        // Every ISA decodes the same bits.
        if (reference.empty() && expected != 0) {
          reference = dst;
        } else if (expected != 0) {
          ASSERT_EQ(std::memcmp(reference.data(), dst.data(), 4 * expected), 0)
              << "ISA " << isa_name(isa) << " decodes differently";
        }
      }
    }
    (any.ok() ? accepted : rejected)++;
  }
  // Both outcomes occur (the mutations are neither all fatal nor all harmless).
  EXPECT_GT(accepted, 20u);
  EXPECT_GT(rejected, 1000u);
}

}  // namespace
}  // namespace threelc::compression::malformed_blocks
