// The CUDA codec against the CPU codec, on a GPU: byte-identical blocks and bitwise-identical
// error buffers for fp32, fp16 and bf16 input of many sizes and sparsity multipliers, on random
// and adversarial inputs (zeros, all literals, zero runs around the 14-group byte, NaN and Inf,
// a scale that overflows); decode and decode-accumulate bitwise equal to the CPU's (-0.0 kept
// where a trit is zero); malformed blocks rejected with the destination untouched. Every case
// skips, naming the reason, where there is no usable CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <array>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
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
  // expects the same block bytes and the same error afterwards.
  void expect_same_encode(const HostInput& input, const std::vector<float>* e0, float sparsity,
                          const std::string& what) {
    SCOPED_TRACE(what);
    const size_t n = input.count;
    const EncodeOptions options{sparsity, Isa::kAuto};
    std::vector<float> cpu_error = e0 != nullptr ? *e0 : std::vector<float>();
    Bytes cpu_block(max_block_bytes(n));
    EncodedBlock cpu_result;
    ASSERT_OK(encode(input.values(), e0 != nullptr ? cpu_error.data() : nullptr, options, cpu_block,
                     &cpu_result));
    cpu_block.resize(cpu_result.bytes);

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
    EXPECT_EQ(first_byte_mismatch(to_host<uint8_t>(device_block, device_result.bytes), cpu_block),
              -1)
        << "encode_on_device";
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
        expect_same_encode(input, &e0, s, what);
        expect_same_encode(input, nullptr, s, what + " without error feedback");
      }
    }
  }
}

TEST_F(CudaCodecTest, AdversarialInputGivesTheCpuBlock) {
  const size_t n = 2 * kTileValues + 333;
  auto check = [&](const std::string& name, const std::vector<float>& x) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const std::vector<float> e0(n, 0.0f);
      expect_same_encode(make_input(x, dtype), &e0, 1.0f, name + " " + dtype_name(dtype));
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
    expect_same_encode(make_input(x, DType::kFloat32), &e0, 1.9f, name);
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
  expect_same_encode(subnormal, &e0, 1.0f, "fp16 subnormals");
  expect_same_encode(nans, &e0, 1.0f, "fp16 NaN payloads");
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

  const std::vector<float> sentinel(n, 42.0f);
  DeviceBuffer dst(n * 4);
  auto expect_rejected = [&](const Bytes& bad, size_t expected, const std::string& what) {
    ASSERT_CUDA(cudaMemcpy(dst.get(), sentinel.data(), n * 4, cudaMemcpyHostToDevice));
    const Status decoded =
        cuda::decode_from_host(bad, expected, dst.get<float>(), workspace_, stream_);
    const Status added =
        cuda::decode_add_from_host(bad, expected, 1.0f, dst.get<float>(), workspace_, stream_);
    EXPECT_FALSE(decoded.ok()) << what;
    EXPECT_FALSE(added.ok()) << what;
    EXPECT_FALSE(decoded.message().empty()) << what;
    ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(first_bit_mismatch(to_host<float>(dst, n), sentinel), -1) << what;
  };
  expect_rejected(Bytes(block.begin(), block.end() - 1), n, "truncated");
  expect_rejected(block, n + 1, "wrong expected count");
  Bytes bad_table = block;
  bad_table[kHeaderBytes] ^= 0x01;  // tile 0's length no longer sums to the payload
  expect_rejected(bad_table, n, "corrupt tile table");
  Bytes bad_format = block;
  bad_format[0] = 9;
  expect_rejected(bad_format, n, "unknown format");
  // A valid format 2 block (a scale per tile) is the CPU codec's only: refused, not misread.
  Bytes tiled(max_block_bytes(n));
  ASSERT_OK(encode(Values{x.data(), DType::kFloat32, n}, nullptr,
                   EncodeOptions{.sparsity = 1.0f, .scale_tile = 1280}, tiled, &result));
  tiled.resize(result.bytes);
  ASSERT_EQ(result.format, Format::kThreeLCTiled);
  expect_rejected(tiled, n, "format 2");
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
  const Status tiled = cuda::encode_to_host(
      cuda::DeviceValues{x.get(), DType::kFloat32, 10}, nullptr,
      EncodeOptions{.sparsity = 1.0f, .scale_tile = 5}, workspace_, stream_, out, &result);
  EXPECT_FALSE(tiled.ok());
  EXPECT_NE(tiled.message().find("format v1 only"), std::string::npos) << tiled.message();
}

}  // namespace
}  // namespace threelc::compression
