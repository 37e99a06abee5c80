// The CUDA codec against the CPU codec, on a GPU, in block format v2 (a scale per tile of 5,
// 320, 1280 or 20480 values): all-zero tiles, lone nonzeros, ties at a tile's threshold, a block
// of one tile written as v1, non-finite input; decode and decode-accumulate bitwise equal to the
// CPU's; malformed tiled blocks rejected with the destination untouched.
#include <gtest/gtest.h>

#include "cuda_codec_fixture.h"

namespace threelc::compression::cuda_codec_test {
namespace {

constexpr std::array<size_t, 4> kScaleTiles = {5, 320, 1280, kTileValues};
constexpr std::array<DType, 3> kDTypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

EncodeOptions tiled_options(float sparsity, size_t scale_tile) {
  return EncodeOptions{.sparsity = sparsity, .scale_tile = scale_tile};
}

// Random values whose tiles of `per_tile` differ in magnitude (tile t times 2^(3 (t mod 5) - 6),
// within fp16's range), so that the tiles' scales differ.
std::vector<float> tile_varying_values(size_t n, size_t per_tile, uint32_t seed) {
  std::vector<float> x = random_values(n, seed);
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::ldexp(x[i], 3 * static_cast<int>((i / per_tile) % 5) - 6);
  }
  return x;
}

std::string tile_name(size_t scale_tile) { return " T=" + std::to_string(scale_tile); }

TEST_F(CudaCodecTest, TiledRandomInputGivesTheCpuBlockAndError) {
  for (size_t tile : kScaleTiles) {
    // One value, one tile (both v1), one value more than a tile, whole tiles, a partial last
    // tile, more than one v1 tile.
    const std::array<size_t, 8> sizes = {
        1, tile - 1, tile, tile + 1, 2 * tile, 3 * tile + 7, kTileValues + 3, 100003};
    for (size_t n : sizes) {
      for (DType dtype : kDTypes) {
        for (float s : {1.0f, 1.5f, 1.9f}) {
          const auto seed = static_cast<uint32_t>(n + tile);
          const HostInput input = make_input(tile_varying_values(n, tile, seed), dtype);
          const std::vector<float> e0 = random_values(n, seed + 1, 0.01f);
          const std::string what = std::string(dtype_name(dtype)) + tile_name(tile) +
                                   " n=" + std::to_string(n) + " s=" + std::to_string(s);
          Format format = Format::kRaw;
          expect_same_encode(input, &e0, tiled_options(s, tile), what, &format);
          EXPECT_EQ(format, n > tile ? Format::kThreeLCTiled : Format::kThreeLC) << what;
          expect_same_encode(input, nullptr, tiled_options(s, tile),
                             what + " without error feedback");
        }
      }
    }
  }
}

TEST_F(CudaCodecTest, TiledAdversarialInputGivesTheCpuBlock) {
  for (size_t tile : {size_t{5}, size_t{320}, size_t{1280}}) {
    const size_t n = 7 * tile + 3;  // eight tiles, the last of 3 values
    const size_t groups = tile / kTritsPerGroup;
    auto check = [&](const std::string& name, const std::vector<float>& x) {
      for (DType dtype : kDTypes) {
        for (float s : {1.0f, 1.5f}) {
          const std::vector<float> e0(n, 0.0f);
          const HostInput input = make_input(x, dtype);
          const std::string what =
              name + tile_name(tile) + " " + dtype_name(dtype) + " s=" + std::to_string(s);
          Format format = Format::kRaw;
          expect_same_encode(input, &e0, tiled_options(s, tile), what, &format);
          EXPECT_EQ(format, Format::kThreeLCTiled) << what;
          expect_same_encode(input, nullptr, tiled_options(s, tile),
                             what + " without error feedback");
        }
      }
    };
    check("zeros", std::vector<float>(n, 0.0f));  // every tile scale 0
    check("negative zeros", std::vector<float>(n, -0.0f));
    {
      // All-zero tiles between tiles of different magnitudes: zero runs stop at tile edges.
      std::vector<float> x = tile_varying_values(n, tile, 11);
      for (size_t i = 0; i < n; ++i) {
        if ((i / tile) % 2 == 0) x[i] = 0.0f;
      }
      check("zero tiles between", x);
    }
    {
      // Tiles with a single nonzero: one literal among zero groups, and a tiny one of its own.
      std::vector<float> x(n, 0.0f);
      x[tile + tile / 2] = 3.0f;
      x[6 * tile - 1] = -1e-20f;
      check("single nonzeros", x);
    }
    {
      // Ties at each tile's threshold h_t = M_t / 2 (s = 1): not above it, so zero trits.
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) {
        const float m = std::ldexp(1.0f, static_cast<int>((i / tile) % 3) - 1);
        x[i] = i % tile == 0 ? m : (i % 2 == 0 ? 0.5f * m : -0.5f * m);
      }
      check("ties at each tile's h", x);
    }
    {
      // Tiles of denormals only have their own denormal scale; one large value elsewhere.
      std::vector<float> x(n, 1e-45f);
      x[n / 2] = 3.0f;
      check("denormal tiles", x);
    }
    {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? 1.0f : -1.0f;
      check("all literals", x);
    }
    // Zero runs of these lengths (in groups) ending at tile 1's last group: group j of a tile is
    // zero when its values j, j + G, ..., j + 4G quantize to zero.
    for (size_t run : {1, 2, 13, 14, 15, 27, 28, 29, 63, 255}) {
      if (run > groups) continue;
      std::vector<float> x(n, 1.0f);
      for (size_t j = groups - run; j < groups; ++j) {
        for (size_t k = 0; k < kTritsPerGroup; ++k) x[tile + j + k * groups] = 0.01f;
      }
      check("run of " + std::to_string(run), x);
    }
  }
}

TEST_F(CudaCodecTest, TiledNonFiniteInputAndScaleOverflowGoRawWithTheErrorUntouched) {
  const size_t n = kTileValues + 9;
  for (size_t tile : {size_t{5}, size_t{320}, size_t{1280}}) {
    auto check = [&](const std::string& name, const std::vector<float>& x,
                     const std::vector<float>& e0, float s) {
      for (DType dtype : kDTypes) {
        const std::string what = name + tile_name(tile) + " " + dtype_name(dtype);
        Format format = Format::kThreeLC;
        expect_same_encode(make_input(x, dtype), &e0, tiled_options(s, tile), what, &format);
        EXPECT_EQ(format, Format::kRaw) << what;
      }
      // The CPU's error is e0 still (expect_same_encode compared the GPU's with the CPU's).
      Bytes block(max_block_bytes(n));
      EncodedBlock result;
      std::vector<float> error = e0;
      ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, error.data(), tiled_options(s, tile),
                       block, &result));
      EXPECT_EQ(result.format, Format::kRaw) << name;
      EXPECT_EQ(first_bit_mismatch(error, e0), -1) << name;
    };
    const std::vector<float> e0 = random_values(n, 6, 0.1f);
    const float inf = std::numeric_limits<float>::infinity();
    const float big = std::numeric_limits<float>::max();
    for (const auto& [name, at, bad] :
         {std::tuple<const char*, size_t, float>{"NaN in the last tile", n - 2,
                                                 std::numeric_limits<float>::quiet_NaN()},
          {"Inf in the first tile", 1, inf},
          {"-Inf in a middle tile", n / 2, -inf}}) {
      std::vector<float> x = tile_varying_values(n, tile, 3);
      x[at] = bad;
      check(name, x, e0, 1.0f);
    }
    {
      std::vector<float> x = tile_varying_values(n, tile, 4);
      x[2 * tile + 1] = big;  // that tile's M * 1.9 overflows
      check("scale overflow", x, e0, 1.9f);
    }
    {
      std::vector<float> x = tile_varying_values(n, tile, 5);
      std::vector<float> e = e0;
      x[tile + 2] = big;  // x + e overflows
      e[tile + 2] = big;
      check("x + e overflow", x, e, 1.0f);
    }
  }
}

TEST_F(CudaCodecTest, TiledRepeatedEncodesCarryTheErrorLikeTheCpu) {
  // One workspace and one error buffer through scale tiles of every size and back to v1: the
  // workspace's per-tile buffers grow (5: many tiles; 1280: more bytes per tile than 320).
  const size_t n = 5 * kTileValues + 11;
  const std::array<size_t, 8> tiles = {320, 320, 5, 1280, kTileValues, 0, 5, 320};
  std::vector<float> cpu_error(n, 0.0f);
  DeviceBuffer x(n * 4);
  DeviceBuffer error(n * 4);
  ASSERT_TRUE(x.ok() && error.ok());
  ASSERT_CUDA(cudaMemset(error.get(), 0, n * 4));
  for (size_t step = 0; step < tiles.size(); ++step) {
    const size_t tile = tiles[step];
    const std::string what = "step " + std::to_string(step) + tile_name(tile);
    const std::vector<float> values =
        tile_varying_values(n, tile != 0 ? tile : kTileValues, 200 + static_cast<uint32_t>(step));
    Bytes cpu_block(max_block_bytes(n));
    Bytes gpu_block(max_block_bytes(n));
    EncodedBlock cpu_result;
    EncodedBlock gpu_result;
    ASSERT_OK(encode(Values{values.data(), DType::kFloat32, n}, cpu_error.data(),
                     tiled_options(1.5f, tile), cpu_block, &cpu_result));
    EXPECT_EQ(cpu_result.format, tile != 0 ? Format::kThreeLCTiled : Format::kThreeLC) << what;
    ASSERT_CUDA(cudaMemcpy(x.get(), values.data(), n * 4, cudaMemcpyHostToDevice));
    ASSERT_OK(cuda::encode_to_host(cuda::DeviceValues{x.get(), DType::kFloat32, n},
                                   error.get<float>(), tiled_options(1.5f, tile), workspace_,
                                   stream_, gpu_block, &gpu_result));
    cpu_block.resize(cpu_result.bytes);
    gpu_block.resize(gpu_result.bytes);
    EXPECT_EQ(gpu_result.format, cpu_result.format) << what;
    EXPECT_EQ(first_byte_mismatch(gpu_block, cpu_block), -1) << what;
    EXPECT_EQ(first_bit_mismatch(to_host<float>(error, n), cpu_error), -1) << what;
  }
}

TEST_F(CudaCodecTest, TiledDecodeAndDecodeAddMatchTheCpu) {
  for (size_t tile : kScaleTiles) {
    for (size_t n : {tile + 1, 3 * tile + 7, 2 * kTileValues + 5, size_t{100003}}) {
      for (float s : {1.0f, 1.9f}) {
        const std::vector<float> x =
            tile_varying_values(n, tile, static_cast<uint32_t>(n + tile + 7));
        Bytes block(max_block_bytes(n));
        EncodedBlock result;
        ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr, tiled_options(s, tile),
                         block, &result));
        ASSERT_EQ(result.format, Format::kThreeLCTiled);
        block.resize(result.bytes);
        expect_same_decode(
            block, n, 0.25f,
            "v2" + tile_name(tile) + " n=" + std::to_string(n) + " s=" + std::to_string(s));
      }
    }
  }
  // All-zero tiles (scale 0; decode_add skips them), tiles of literals with scales far apart, a
  // tile with a lone literal.
  for (size_t tile : {size_t{5}, size_t{320}}) {
    const size_t n = 6 * tile + 2;
    std::vector<float> x(n, 0.0f);
    for (size_t i = tile; i < 2 * tile; ++i) x[i] = i % 2 == 0 ? 2.0f : -2.0f;
    for (size_t i = 3 * tile; i < 4 * tile; ++i) x[i] = i % 2 == 0 ? 1e-3f : -1e-3f;
    x[5 * tile + 1] = 7.0f;
    Bytes block(max_block_bytes(n));
    EncodedBlock result;
    ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr, tiled_options(1.0f, tile),
                     block, &result));
    ASSERT_EQ(result.format, Format::kThreeLCTiled);
    block.resize(result.bytes);
    expect_same_decode(block, n, -1.5f, "zero tiles and literals" + tile_name(tile));
  }
}

TEST_F(CudaCodecTest, MalformedTiledBlocksAreRejectedWithTheDestinationUntouched) {
  const size_t n = kTileValues + 100;
  const size_t tile = 1280;
  const size_t tiles = tile_count(n, tile);  // 17
  const std::vector<float> x = random_values(n, 9);
  Bytes block(max_block_bytes(n));
  EncodedBlock result;
  ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr, tiled_options(1.0f, tile), block,
                   &result));
  ASSERT_EQ(result.format, Format::kThreeLCTiled);
  block.resize(result.bytes);
  expect_same_decode(block, n, 1.0f, "the block as encoded");

  const size_t lengths_at = kHeaderBytes;
  const size_t scales_at = kHeaderBytes + tiles * kTileLengthBytes;
  auto with_u16 = [&](size_t at, size_t value) {
    Bytes bad = block;
    const auto v = static_cast<uint16_t>(value);
    std::memcpy(bad.data() + at, &v, sizeof v);
    return bad;
  };
  auto with_f32 = [&](size_t at, float value) {
    Bytes bad = block;
    std::memcpy(bad.data() + at, &value, sizeof value);
    return bad;
  };
  auto length = [&](size_t t) {
    uint16_t v;
    std::memcpy(&v, block.data() + lengths_at + t * kTileLengthBytes, sizeof v);
    return size_t{v};
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(with_u16(2, 0), n, n, "G = 0");
  expect_rejected(with_u16(2, kGroupsPerTile + 1), n, n, "G = 4097");
  expect_rejected(with_u16(2, 0xFFFF), n, n, "G = 65535");
  expect_rejected(with_u16(2, 128), n, n, "another G: tiles of 640");
  expect_rejected(with_f32(scales_at + 3 * kTileScaleBytes, -1.0f), n, n, "negative tile scale");
  expect_rejected(with_f32(scales_at + 3 * kTileScaleBytes, -0.0f), n, n, "tile scale -0");
  expect_rejected(with_f32(scales_at + (tiles - 1) * kTileScaleBytes, nan), n, n, "NaN tile scale");
  expect_rejected(with_f32(scales_at, std::numeric_limits<float>::infinity()), n, n,
                  "infinite tile scale");
  expect_rejected(with_f32(8, nan), n, n, "NaN block scale");
  expect_rejected(with_u16(lengths_at, length(0) + 1), n, n, "tile lengths exceed the payload");
  {
    Bytes bad = with_u16(lengths_at, length(0) + 1);
    const auto shorter = static_cast<uint16_t>(length(1) - 1);
    std::memcpy(bad.data() + lengths_at + kTileLengthBytes, &shorter, sizeof shorter);
    expect_rejected(bad, n, n, "a byte moved from tile 1 to tile 0");  // the sum still matches
  }
  {
    Bytes bad = block;
    uint32_t payload;
    std::memcpy(&payload, bad.data() + 12, sizeof payload);
    ++payload;
    std::memcpy(bad.data() + 12, &payload, sizeof payload);
    expect_rejected(bad, n, n, "payload_bytes one more");
  }
  expect_rejected(Bytes(block.begin(), block.end() - 1), n, n, "truncated");
  expect_rejected(Bytes(block.begin(), block.begin() + static_cast<long>(scales_at + 10)), n, n,
                  "truncated in the scale table");
  expect_rejected(block, n, n - 1, "wrong expected count");
  {
    Bytes bad = block;
    bad[0] = 1;  // v1 with G in the reserved field
    expect_rejected(bad, n, n, "format 1 with G");
  }
  {
    // A v1 block relabelled format 2 with G = 4096: its table has no scales.
    Bytes v1(max_block_bytes(n));
    ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr, EncodeOptions{}, v1, &result));
    v1.resize(result.bytes);
    v1[0] = 2;
    const auto g = static_cast<uint16_t>(kGroupsPerTile);
    std::memcpy(v1.data() + 2, &g, sizeof g);
    expect_rejected(v1, n, n, "v1 block relabelled format 2");
  }

  // The device-resident decoders trust validate()'s BlockInfo, but not a v2 one whose tile size
  // no encoder writes.
  BlockInfo info;
  ASSERT_OK(validate(block, n, &info));
  ASSERT_EQ(info.tile_values, tile);
  DeviceBuffer device_block(block.size());
  ASSERT_TRUE(device_block.ok());
  ASSERT_CUDA(cudaMemcpy(device_block.get(), block.data(), block.size(), cudaMemcpyHostToDevice));
  const std::vector<float> sentinel(n, 42.0f);
  DeviceBuffer dst(n * 4);
  ASSERT_TRUE(dst.ok());
  ASSERT_CUDA(cudaMemcpy(dst.get(), sentinel.data(), n * 4, cudaMemcpyHostToDevice));
  for (size_t values : {size_t{0}, size_t{7}, kTileValues + 5}) {
    BlockInfo wrong = info;
    wrong.tile_values = values;
    const Status decoded = cuda::decode_on_device(device_block.get<uint8_t>(), wrong,
                                                  dst.get<float>(), workspace_, stream_);
    const Status added = cuda::decode_add_on_device(device_block.get<uint8_t>(), wrong, 1.0f,
                                                    dst.get<float>(), workspace_, stream_);
    EXPECT_FALSE(decoded.ok()) << values;
    EXPECT_FALSE(added.ok()) << values;
    EXPECT_NE(decoded.message().find("values per tile"), std::string::npos) << decoded.message();
  }
  ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), sentinel), -1) << "bad BlockInfo";
}

}  // namespace
}  // namespace threelc::compression::cuda_codec_test
