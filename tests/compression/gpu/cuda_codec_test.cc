// The CUDA codec against the CPU codec, on a GPU, in block format v1: byte-identical blocks and
// bitwise-identical error buffers for fp32, fp16 and bf16 input of many sizes and sparsity
// multipliers, on random and adversarial inputs (zeros, all literals, zero runs around the
// 14-group byte, NaN and Inf, a scale that overflows); decode and decode-accumulate bitwise
// equal to the CPU's (-0.0 kept where a trit is zero); malformed blocks rejected, with the CPU's
// message, and the destination untouched. Format v2: cuda_codec_tiled_test.cc.
#include <gtest/gtest.h>

#include "cuda_codec_fixture.h"

namespace threelc::compression::cuda_codec_test {
namespace {

TEST_F(CudaCodecTest, RandomInputGivesTheCpuBlockAndError) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (size_t n : kSizes) {
      for (float s : {1.0f, 1.5f, 1.9f}) {
        const HostInput input = make_input(random_values(n, static_cast<uint32_t>(n)), dtype);
        const std::vector<float> e0 = random_values(n, static_cast<uint32_t>(n + 1), 0.1f);
        const std::string what =
            std::string(dtype_name(dtype)) + " n=" + std::to_string(n) + " s=" + std::to_string(s);
        expect_same_encode(input, &e0, EncodeOptions{s}, what);
        expect_same_encode(input, nullptr, EncodeOptions{s}, what + " without error feedback");
      }
    }
  }
}

TEST_F(CudaCodecTest, AdversarialInputGivesTheCpuBlock) {
  const size_t n = 2 * kTileValues + 333;
  auto check = [&](const std::string& name, const std::vector<float>& x) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const std::vector<float> e0(n, 0.0f);
      expect_same_encode(make_input(x, dtype), &e0, EncodeOptions{},
                         name + " " + dtype_name(dtype));
    }
  };
  check("zeros", std::vector<float>(n, 0.0f));
  check("negative zeros", std::vector<float>(n, -0.0f));
  {
    std::vector<float> x(n);  // every group a literal: +-1 alternating
    for (size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? 1.0f : -1.0f;
    check("all literals", x);
  }
  {
    // Ties at exactly +-h = M/2 (s = 1): 0.5 is not above h, so these trits are zero.
    std::vector<float> x(n, 0.5f);
    x[17] = 1.0f;
    x[18] = -0.5f;
    check("ties at h", x);
  }
  {
    std::vector<float> x(n, 1e-45f);  // denormals, one large value
    x[n / 2] = 3.0f;
    check("denormals", x);
  }
  // Zero runs of these lengths (in groups) after a literal, in the first tile: a group j is zero
  // when values j, j + g, ..., j + 4g all quantize to zero.
  for (size_t run : {1, 2, 13, 14, 15, 27, 28, 29, 300}) {
    const size_t g = kGroupsPerTile;
    std::vector<float> x(n, 1.0f);
    for (size_t j = 100; j < 100 + run; ++j) {
      for (size_t k = 0; k < kTritsPerGroup; ++k) x[j + k * g] = 0.01f;
    }
    check("run of " + std::to_string(run), x);
  }
}

TEST_F(CudaCodecTest, NonFiniteInputAndScaleOverflowGoRawWithTheErrorUntouched) {
  const size_t n = kTileValues + 9;
  auto check = [&](const std::string& name, const std::vector<float>& x) {
    const std::vector<float> e0 = random_values(n, 5, 0.1f);
    expect_same_encode(make_input(x, DType::kFloat32), &e0, EncodeOptions{1.9f}, name);
    // The block is raw and the error unchanged (expect_same_encode compared the GPU's error
    // with the CPU's; here the CPU's with e0).
    Bytes block(max_block_bytes(n));
    EncodedBlock result;
    std::vector<float> error = e0;
    ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, error.data(), EncodeOptions{1.9f}, block,
                     &result));
    EXPECT_EQ(result.format, Format::kRaw) << name;
    EXPECT_EQ(first_bit_mismatch(error, e0), -1) << name;
  };
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = random_values(n, 3);
    x[n - 2] = bad;
    check("non-finite " + std::to_string(bad), x);
  }
  {
    std::vector<float> x = random_values(n, 4);
    x[5] = std::numeric_limits<float>::max();  // M * 1.9 overflows
    check("scale overflow", x);
  }
}

// fp16 bit patterns the hardware conversion could change: subnormals (3LC block), and NaN
// payloads, signalling NaNs and infinities (raw block: the widened values, bit for bit).
TEST_F(CudaCodecTest, Fp16SubnormalsAndNaNPayloadsGiveTheCpuBlock) {
  const size_t n = kTileValues + 3;
  HostInput subnormal{DType::kFloat16, std::vector<uint8_t>(2 * n), n};
  HostInput nans{DType::kFloat16, std::vector<uint8_t>(2 * n), n};
  const uint16_t specials[] = {0x7C01, 0x7DFF, 0xFE00, 0xFC00, 0x7C00, 0x8001, 0x0001};
  for (size_t i = 0; i < n; ++i) {
    const auto tiny = static_cast<uint16_t>((i % 0x3FF) + 1 + (i % 2 == 0 ? 0x8000 : 0));
    const uint16_t special = i % 97 == 0 ? specials[(i / 97) % 7] : tiny;
    std::memcpy(subnormal.bytes.data() + 2 * i, &tiny, 2);
    std::memcpy(nans.bytes.data() + 2 * i, &special, 2);
  }
  const std::vector<float> e0(n, 0.0f);
  expect_same_encode(subnormal, &e0, EncodeOptions{}, "fp16 subnormals");
  expect_same_encode(nans, &e0, EncodeOptions{}, "fp16 NaN payloads");
}

TEST_F(CudaCodecTest, RepeatedEncodesCarryTheErrorLikeTheCpu) {
  const size_t n = 5 * kTileValues + 11;
  std::vector<float> cpu_error(n, 0.0f);
  DeviceBuffer x(n * 4);
  DeviceBuffer error(n * 4);
  ASSERT_CUDA(cudaMemset(error.get(), 0, n * 4));
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> values = random_values(n, 100 + static_cast<uint32_t>(step));
    Bytes cpu_block(max_block_bytes(n));
    Bytes gpu_block(max_block_bytes(n));
    EncodedBlock cpu_result;
    EncodedBlock gpu_result;
    ASSERT_OK(encode(Values{values.data(), DType::kFloat32, n}, cpu_error.data(),
                     EncodeOptions{1.5f}, cpu_block, &cpu_result));
    ASSERT_CUDA(cudaMemcpy(x.get(), values.data(), n * 4, cudaMemcpyHostToDevice));
    ASSERT_OK(cuda::encode_to_host(cuda::DeviceValues{x.get(), DType::kFloat32, n},
                                   error.get<float>(), EncodeOptions{1.5f}, workspace_, stream_,
                                   gpu_block, &gpu_result));
    cpu_block.resize(cpu_result.bytes);
    gpu_block.resize(gpu_result.bytes);
    EXPECT_EQ(first_byte_mismatch(gpu_block, cpu_block), -1) << "step " << step;
    EXPECT_EQ(first_bit_mismatch(to_host<float>(error, n), cpu_error), -1) << "step " << step;
  }
}

TEST_F(CudaCodecTest, DecodeAndDecodeAddMatchTheCpu) {
  for (size_t n : kSizes) {
    for (float s : {1.0f, 1.9f}) {
      const std::vector<float> x = random_values(n, static_cast<uint32_t>(n + 7));
      Bytes block(max_block_bytes(n));
      EncodedBlock result;
      ASSERT_OK(
          encode(Values{x.data(), DType::kFloat32, n}, nullptr, EncodeOptions{s}, block, &result));
      block.resize(result.bytes);
      expect_same_decode(block, n, 0.25f, "3LC n=" + std::to_string(n) + " s=" + std::to_string(s));
      Bytes raw(raw_block_bytes(n));
      ASSERT_OK(encode_raw(Values{x.data(), DType::kFloat32, n}, raw, &result));
      expect_same_decode(raw, n, 0.25f, "raw n=" + std::to_string(n));
    }
  }
  // Long zero runs, all-zero tiles (skipped by decode_add) and all literals.
  const size_t n = 3 * kTileValues;
  std::vector<float> x(n, 0.0f);
  for (size_t i = kTileValues; i < 2 * kTileValues; ++i) x[i] = i % 2 == 0 ? 2.0f : -2.0f;
  x[5] = 1.0f;
  Bytes block(max_block_bytes(n));
  EncodedBlock result;
  ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr, EncodeOptions{}, block, &result));
  block.resize(result.bytes);
  expect_same_decode(block, n, 1.0f, "runs and literals");
}

TEST_F(CudaCodecTest, MalformedBlocksAreRejectedWithTheDestinationUntouched) {
  const size_t n = kTileValues + 100;
  const std::vector<float> x = random_values(n, 9);
  Bytes block(max_block_bytes(n));
  EncodedBlock result;
  ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr, EncodeOptions{}, block, &result));
  block.resize(result.bytes);

  expect_rejected(Bytes(block.begin(), block.end() - 1), n, n, "truncated");
  expect_rejected(block, n, n + 1, "wrong expected count");
  Bytes bad_table = block;
  bad_table[kHeaderBytes] ^= 0x01;  // tile 0's length no longer sums to the payload
  expect_rejected(bad_table, n, n, "corrupt tile table");
  Bytes bad_format = block;
  bad_format[0] = 9;
  expect_rejected(bad_format, n, n, "unknown format");
  Bytes bad_reserved = block;
  bad_reserved[2] = 4;  // v1 has no G
  expect_rejected(bad_reserved, n, n, "v1 with a reserved field");
}

TEST_F(CudaCodecTest, WrongArgumentsAreRejected) {
  Bytes out(max_block_bytes(10));
  EncodedBlock result;
  DeviceBuffer x(40);
  const Status sparsity =
      cuda::encode_to_host(cuda::DeviceValues{x.get(), DType::kFloat32, 10}, nullptr,
                           EncodeOptions{2.0f}, workspace_, stream_, out, &result);
  EXPECT_FALSE(sparsity.ok());
  EXPECT_NE(sparsity.message().find("sparsity"), std::string::npos) << sparsity.message();
  const Status small = cuda::encode_to_host(cuda::DeviceValues{x.get(), DType::kFloat32, 10},
                                            nullptr, EncodeOptions{}, workspace_, stream_,
                                            std::span<uint8_t>(out.data(), 20), &result);
  EXPECT_FALSE(small.ok());
  EXPECT_NE(small.message().find("output buffer"), std::string::npos) << small.message();
  for (size_t tile : {size_t{7}, kTileValues + 5}) {
    const Status tiled = cuda::encode_to_host(
        cuda::DeviceValues{x.get(), DType::kFloat32, 10}, nullptr,
        EncodeOptions{.sparsity = 1.0f, .scale_tile = tile}, workspace_, stream_, out, &result);
    EXPECT_FALSE(tiled.ok()) << tile;
    EXPECT_NE(tiled.message().find("scale tile"), std::string::npos) << tiled.message();
  }
}

}  // namespace
}  // namespace threelc::compression::cuda_codec_test
