// The codec's inputs: fp16/bf16 widening and encoding as their widened values, and the
// arguments it refuses (sparsity, scale tile, output buffer, null values), formats v1 and v2.
#include <gtest/gtest.h>

#include "invariants.h"

namespace threelc::compression::invariants {
namespace {

TEST(Invariant, Float16IsWidenedExactly) {
  // Every fp16 bit pattern through encode_raw.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  Bytes out(raw_block_bytes(all.size()));
  EncodedBlock result;
  ASSERT_TRUE(encode_raw(Values{all.data(), DType::kFloat16, all.size()}, out, &result).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, out.data() + kHeaderBytes + 4 * i, 4);
    ASSERT_EQ(got, bits_of(half_to_float(all[i]))) << "fp16 0x" << std::hex << i;
  }
  // Every bf16 bit pattern.
  ASSERT_TRUE(encode_raw(Values{all.data(), DType::kBFloat16, all.size()}, out, &result).ok());
  for (size_t i = 0; i < all.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, out.data() + kHeaderBytes + 4 * i, 4);
    ASSERT_EQ(got, static_cast<uint32_t>(i) << 16) << "bf16 0x" << std::hex << i;
  }
}

// fp16 and bf16 input encodes as its exactly widened fp32 values: the same block and error.
void check_half_precision(uint32_t seed, size_t scale_tile) {
  std::mt19937 rng(seed);
  for (int round = 0; round < 16; ++round) {
    const size_t n = random_size(rng);
    std::vector<uint16_t> half(n), brain(n);
    std::vector<float> half_wide(n), brain_wide(n);
    for (size_t i = 0; i < n; ++i) {
      // Finite fp16 patterns (exponent < 31); any bf16 pattern with a finite exponent.
      uint16_t h = static_cast<uint16_t>(rng());
      if (((h >> 10) & 0x1F) == 0x1F) h = static_cast<uint16_t>(h & 0xBFFF);
      half[i] = h;
      half_wide[i] = half_to_float(h);
      uint16_t b = static_cast<uint16_t>(rng());
      if (((b >> 7) & 0xFF) == 0xFF) b = static_cast<uint16_t>(b & 0xBFFF);
      if (round % 2 == 0) b = static_cast<uint16_t>(bits_of(std::ldexp(half_wide[i], 3)) >> 16);
      brain[i] = b;
      brain_wide[i] = float_of(uint32_t{b} << 16);
    }
    const std::vector<float> e_old = random_values(rng, n, 3);
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE("round " + std::to_string(round) + " n " + std::to_string(n) + " scale_tile " +
                   std::to_string(scale_tile) + " isa " + isa_label(isa));
      for (const auto& [dtype, narrow, wide] :
           {std::tuple{DType::kFloat16, &half, &half_wide},
            std::tuple{DType::kBFloat16, &brain, &brain_wide}}) {
        std::vector<float> e1 = e_old, e2 = e_old;
        EncodedBlock r1, r2;
        const Bytes b1 =
            encode_or_die(Values{narrow->data(), dtype, n}, e1.data(), 1.0f, isa, &r1, scale_tile);
        const Bytes b2 = encode_or_die(Values{wide->data(), DType::kFloat32, n}, e2.data(), 1.0f,
                                       isa, &r2, scale_tile);
        ASSERT_EQ(b1, b2);
        ASSERT_TRUE(n == 0 || std::memcmp(e1.data(), e2.data(), 4 * n) == 0);
        ASSERT_EQ(r1.format, r2.format);
      }
    }
  }
}

TEST(Invariant, HalfPrecisionEncodesLikeItsWidenedValues) { check_half_precision(3, 0); }

TEST(Invariant, TiledHalfPrecisionEncodesLikeItsWidenedValues) {
  uint32_t seed = 4;
  for (size_t scale_tile : kScaleTiles) check_half_precision(seed++, scale_tile);
}

TEST(Invariant, SparsityOutsideRangeIsRejected) {
  const std::vector<float> x = {1.0f, 2.0f};
  std::vector<float> e = {0.5f, 0.5f};
  for (float s : {0.0f, 0.999999f, -1.0f, 2.0f, 2.5f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    Bytes out(max_block_bytes(2), 0xAB);
    EncodedBlock result;
    const Status status = encode(Values{x.data(), DType::kFloat32, 2}, e.data(),
                                 EncodeOptions{s, Isa::kAuto}, out, &result);
    EXPECT_FALSE(status.ok()) << "sparsity " << s;
    EXPECT_NE(status.message().find("sparsity"), std::string::npos) << status.message();
    EXPECT_EQ(out, Bytes(max_block_bytes(2), 0xAB));
    EXPECT_EQ(e, (std::vector<float>{0.5f, 0.5f}));
  }
  for (float s : {1.0f, 1.5f, std::nextafter(2.0f, 0.0f)}) {
    Bytes out(max_block_bytes(2));
    EncodedBlock result;
    EXPECT_TRUE(encode(Values{x.data(), DType::kFloat32, 2}, nullptr, EncodeOptions{s, Isa::kAuto},
                       out, &result)
                    .ok())
        << s;
  }
}

TEST(Invariant, ScaleTileOutsideRangeIsRejected) {
  const std::vector<float> x(12, 0.5f);
  std::vector<float> e(12, 0.25f);
  for (size_t scale_tile : {size_t{1}, size_t{3}, size_t{4}, size_t{7}, size_t{12}, size_t{20481},
                            size_t{20485}, size_t{40960}, SIZE_MAX}) {
    SCOPED_TRACE("scale_tile " + std::to_string(scale_tile));
    EXPECT_FALSE(scale_tile_valid(scale_tile));
    Bytes out(max_block_bytes(12), 0xAB);
    EncodedBlock result;
    const Status status = encode(Values{x.data(), DType::kFloat32, 12}, e.data(),
                                 EncodeOptions{1.0f, Isa::kAuto, scale_tile}, out, &result);
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("scale tile of " + std::to_string(scale_tile)),
              std::string::npos)
        << status.message();
    EXPECT_EQ(out, Bytes(max_block_bytes(12), 0xAB));
    EXPECT_EQ(e, std::vector<float>(12, 0.25f));
  }
  for (size_t scale_tile :
       {size_t{0}, size_t{5}, size_t{10}, size_t{1280}, size_t{20475}, size_t{20480}}) {
    SCOPED_TRACE("scale_tile " + std::to_string(scale_tile));
    EXPECT_TRUE(scale_tile_valid(scale_tile));
    Bytes out(max_block_bytes(12));
    EncodedBlock result;
    const Status status = encode(Values{x.data(), DType::kFloat32, 12}, nullptr,
                                 EncodeOptions{1.0f, Isa::kAuto, scale_tile}, out, &result);
    EXPECT_TRUE(status.ok()) << status.message();
  }
}

// A v2 block never exceeds max_block_bytes (16 + 4n): blocks whose every group is a literal
// (no zero run shrinks them), for every n up to a few tiles of the smallest scale tiles and at
// the edges of larger ones, written into exactly max_block_bytes with guard bytes after it.
TEST(Invariant, TiledBlocksFitMaxBlockBytes) {
  for (size_t scale_tile : {size_t{5}, size_t{10}, size_t{15}, size_t{1280}, size_t{20480}}) {
    std::vector<size_t> sizes;
    for (size_t n = 0; n <= 3 * scale_tile + 7 && n <= 60; ++n) sizes.push_back(n);
    for (size_t n : {scale_tile + 1, 2 * scale_tile + 1}) sizes.push_back(n);
    for (size_t n : sizes) {
      SCOPED_TRACE("n " + std::to_string(n) + " scale_tile " + std::to_string(scale_tile));
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? 1.0f : -1.0f;
      const size_t cap = max_block_bytes(n);
      Bytes out(cap + 64, 0xCD);
      EncodedBlock result;
      const Status status =
          encode(Values{x.data(), DType::kFloat32, n}, nullptr,
                 EncodeOptions{1.0f, Isa::kAuto, scale_tile}, std::span(out.data(), cap), &result);
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_LE(result.bytes, cap);
      EXPECT_EQ(Bytes(out.begin() + static_cast<std::ptrdiff_t>(cap), out.end()), Bytes(64, 0xCD))
          << "wrote past max_block_bytes";
      EXPECT_EQ(result.format, writes_v2(n, scale_tile) ? Format::kThreeLCTiled : Format::kThreeLC);
    }
  }
}

TEST(Invariant, SmallOutputBufferIsRejected) {
  std::vector<float> x(100, 0.5f);
  std::vector<float> e(100, 0.0f);
  Bytes out(max_block_bytes(100) - 1, 0xCD);
  EncodedBlock result;
  Status status =
      encode(Values{x.data(), DType::kFloat32, 100}, e.data(), EncodeOptions{}, out, &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("output buffer"), std::string::npos) << status.message();
  EXPECT_EQ(out, Bytes(max_block_bytes(100) - 1, 0xCD));
  EXPECT_EQ(e, std::vector<float>(100, 0.0f));
  Bytes raw(raw_block_bytes(100) - 1);
  status = encode_raw(Values{x.data(), DType::kFloat32, 100}, raw, &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("output buffer"), std::string::npos) << status.message();
  Bytes header_only(kHeaderBytes - 1);
  EXPECT_FALSE(
      encode(Values{nullptr, DType::kFloat32, 0}, nullptr, EncodeOptions{}, header_only, &result)
          .ok());
}

TEST(Invariant, NullValuesAreRejected) {
  Bytes out(max_block_bytes(4));
  EncodedBlock result;
  const Status status =
      encode(Values{nullptr, DType::kFloat32, 4}, nullptr, EncodeOptions{}, out, &result);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("null"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace threelc::compression::invariants
