// The CUDA codec against the CPU codec, on a GPU: byte-identical blocks and bitwise-identical
// error buffers for fp32, fp16 and bf16 input of many sizes and sparsity multipliers, on random
// and adversarial inputs (zeros, all literals, zero runs around the 14-group byte, NaN and Inf,
// a scale that overflows), in block format v1 and v2 (a scale per tile of 5, 320, 1280 or 20480
// values: all-zero tiles, lone nonzeros, ties at a tile's threshold, a block of one tile written
// as v1); decode and decode-accumulate of both formats bitwise equal to the CPU's (-0.0 kept
// where a trit is zero); malformed blocks rejected, with the CPU's message, and the destination
// untouched. Every case skips, naming the reason, where there is no usable CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"
#include "threelc/compression/cuda_codec.h"
#include "threelc/compression/float16.h"

namespace threelc::compression {
namespace {

using Bytes = std::vector<uint8_t>;

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call
#define ASSERT_OK(call)                             \
  do {                                              \
    const Status status_ = (call);                  \
    ASSERT_TRUE(status_.ok()) << status_.message(); \
  } while (0)

// Device memory freed at scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&data_, bytes > 0 ? bytes : 1) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  bool ok() const { return data_ != nullptr; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

template <typename T>
std::vector<T> to_host(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> host(count);
  if (count > 0) cudaMemcpy(host.data(), buffer.get(), count * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

long first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return static_cast<long>(i);
  }
  return -1;
}

long first_byte_mismatch(const Bytes& a, const Bytes& b) {
  if (a.size() != b.size()) return static_cast<long>(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return -1;
}

// Host input of one dtype: fp32 values narrowed to the dtype's bits.
struct HostInput {
  DType dtype;
  std::vector<uint8_t> bytes;
  size_t count;

  Values values() const { return Values{bytes.data(), dtype, count}; }
};

size_t dtype_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

HostInput make_input(const std::vector<float>& x, DType dtype) {
  HostInput input{dtype, std::vector<uint8_t>(x.size() * dtype_size(dtype)), x.size()};
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == DType::kFloat32) {
      std::memcpy(input.bytes.data() + 4 * i, &x[i], 4);
    } else {
      const uint16_t h = dtype == DType::kFloat16 ? float_to_half(x[i]) : float_to_bfloat16(x[i]);
      std::memcpy(input.bytes.data() + 2 * i, &h, 2);
    }
  }
  return input;
}

const char* dtype_name(DType dtype) {
  return dtype == DType::kFloat32 ? "fp32" : (dtype == DType::kFloat16 ? "fp16" : "bf16");
}

class CudaCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda::device_count(&why) == 0) GTEST_SKIP() << why;
    ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Encodes `input` with error `e0` on the CPU and on the GPU (to host and on the device) and
  // expects the same block bytes and the same error afterwards. `cpu_format`, when given,
  // receives the format of the CPU's block.
  void expect_same_encode(const HostInput& input, const std::vector<float>* e0,
                          const EncodeOptions& options, const std::string& what,
                          Format* cpu_format = nullptr) {
    SCOPED_TRACE(what);
    const size_t n = input.count;
    std::vector<float> cpu_error = e0 != nullptr ? *e0 : std::vector<float>();
    Bytes cpu_block(max_block_bytes(n));
    EncodedBlock cpu_result;
    ASSERT_OK(encode(input.values(), e0 != nullptr ? cpu_error.data() : nullptr, options, cpu_block,
                     &cpu_result));
    cpu_block.resize(cpu_result.bytes);
    if (cpu_format != nullptr) *cpu_format = cpu_result.format;

    DeviceBuffer x(input.bytes.size());
    DeviceBuffer error(n * sizeof(float));
    ASSERT_TRUE(x.ok() && error.ok());
    ASSERT_CUDA(
        cudaMemcpy(x.get(), input.bytes.data(), input.bytes.size(), cudaMemcpyHostToDevice));
    if (e0 != nullptr && n > 0) {
      ASSERT_CUDA(cudaMemcpy(error.get(), e0->data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    const cuda::DeviceValues values{x.get(), input.dtype, n};
    Bytes gpu_block(max_block_bytes(n));
    EncodedBlock gpu_result;
    ASSERT_OK(cuda::encode_to_host(values, e0 != nullptr ? error.get<float>() : nullptr, options,
                                   workspace_, stream_, gpu_block, &gpu_result));
    gpu_block.resize(gpu_result.bytes);
    EXPECT_EQ(gpu_result.format, cpu_result.format);
    EXPECT_EQ(std::bit_cast<uint32_t>(gpu_result.scale), std::bit_cast<uint32_t>(cpu_result.scale));
    EXPECT_EQ(first_byte_mismatch(gpu_block, cpu_block), -1)
        << "block of " << gpu_block.size() << " bytes, CPU's " << cpu_block.size();
    if (e0 != nullptr) {
      EXPECT_EQ(first_bit_mismatch(to_host<float>(error, n), cpu_error), -1) << "error buffer";
    }

    // On the device, from the same starting error: the same bytes once copied back.
    if (e0 != nullptr && n > 0) {
      ASSERT_CUDA(cudaMemcpy(error.get(), e0->data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    DeviceBuffer device_block(max_block_bytes(n));
    EncodedBlock device_result;
    ASSERT_OK(cuda::encode_on_device(values, e0 != nullptr ? error.get<float>() : nullptr, options,
                                     workspace_, stream_, device_block.get<uint8_t>(),
                                     device_block.bytes(), &device_result));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(device_result.bytes, cpu_result.bytes);
    EXPECT_EQ(device_result.format, cpu_result.format);
    EXPECT_EQ(std::bit_cast<uint32_t>(device_result.scale),
              std::bit_cast<uint32_t>(cpu_result.scale));
    EXPECT_EQ(first_byte_mismatch(to_host<uint8_t>(device_block, device_result.bytes), cpu_block),
              -1)
        << "encode_on_device";
    if (e0 != nullptr) {
      EXPECT_EQ(first_bit_mismatch(to_host<float>(error, n), cpu_error), -1)
          << "error buffer of encode_on_device";
    }
  }

  // Decodes and decode-adds `block` on the CPU and the GPU and expects bitwise-equal floats.
  void expect_same_decode(const Bytes& block, size_t n, float alpha, const std::string& what) {
    SCOPED_TRACE(what);
    std::vector<float> cpu(n);
    ASSERT_OK(decode(block, n, cpu.data()));
    DeviceBuffer dst(n * sizeof(float));
    ASSERT_TRUE(dst.ok());
    ASSERT_OK(cuda::decode_from_host(block, n, dst.get<float>(), workspace_, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), cpu), -1) << "decode";

    // Accumulate onto random values with some -0.0: a zero trit must leave them as they are.
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::normal_distribution<float> normal;
    std::vector<float> base(n);
    for (size_t i = 0; i < n; ++i) base[i] = i % 7 == 3 ? -0.0f : normal(rng);
    std::vector<float> cpu_sum = base;
    ASSERT_OK(decode_add(block, n, alpha, cpu_sum.data()));
    if (n > 0) {
      ASSERT_CUDA(cudaMemcpy(dst.get(), base.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    ASSERT_OK(cuda::decode_add_from_host(block, n, alpha, dst.get<float>(), workspace_, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), cpu_sum), -1) << "decode_add";

    // The device-resident decoders on the same block.
    BlockInfo info;
    ASSERT_OK(validate(block, n, &info));
    DeviceBuffer device_block(block.size());
    ASSERT_CUDA(cudaMemcpy(device_block.get(), block.data(), block.size(), cudaMemcpyHostToDevice));
    ASSERT_OK(cuda::decode_on_device(device_block.get<uint8_t>(), info, dst.get<float>(),
                                     workspace_, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), cpu), -1) << "decode_on_device";
    if (n > 0) {
      ASSERT_CUDA(cudaMemcpy(dst.get(), base.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    ASSERT_OK(cuda::decode_add_on_device(device_block.get<uint8_t>(), info, alpha, dst.get<float>(),
                                         workspace_, stream_));
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), cpu_sum), -1) << "decode_add_on_device";
  }

  // Expects `bad` refused by the CUDA decoders from host memory with the CPU decoder's message,
  // and the destination (n values of 42) untouched.
  void expect_rejected(const Bytes& bad, size_t n, size_t expected, const std::string& what) {
    SCOPED_TRACE(what);
    std::vector<float> cpu(n, 42.0f);
    const Status cpu_status = decode(bad, expected, cpu.data());
    ASSERT_FALSE(cpu_status.ok()) << "the CPU decoder accepts it";
    const std::vector<float> sentinel(n, 42.0f);
    DeviceBuffer dst(n * 4);
    ASSERT_TRUE(dst.ok());
    ASSERT_CUDA(cudaMemcpy(dst.get(), sentinel.data(), n * 4, cudaMemcpyHostToDevice));
    const Status decoded =
        cuda::decode_from_host(bad, expected, dst.get<float>(), workspace_, stream_);
    const Status added =
        cuda::decode_add_from_host(bad, expected, 1.0f, dst.get<float>(), workspace_, stream_);
    EXPECT_FALSE(decoded.ok());
    EXPECT_FALSE(added.ok());
    EXPECT_FALSE(decoded.message().empty());
    EXPECT_EQ(decoded.message(), cpu_status.message());
    EXPECT_EQ(added.message(), cpu_status.message());
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), sentinel), -1);
  }

  cudaStream_t stream_ = nullptr;
  cuda::Workspace workspace_;
};

std::vector<float> random_values(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

constexpr std::array<size_t, 8> kSizes = {
    0, 1, 5, kTileValues - 1, kTileValues, kTileValues + 1, 3 * kTileValues + 7, size_t{1} << 20};

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

// --- block format v2: a scale per tile of T values ------------------------------------------

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
}  // namespace threelc::compression
