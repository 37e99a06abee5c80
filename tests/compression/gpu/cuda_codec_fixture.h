// What the CUDA codec tests share: device buffers, host inputs of every dtype, and the fixture
// CudaCodecTest (a stream and a workspace; every case skips, naming the reason, where there is
// no usable CUDA device) with its checks against the CPU codec: the same encode (block bytes
// and error buffer), the same decode and decode-add, the same refusal of a malformed block.
#pragma once

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

namespace threelc::compression::cuda_codec_test {

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

inline long first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return static_cast<long>(i);
  }
  return -1;
}

inline long first_byte_mismatch(const Bytes& a, const Bytes& b) {
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

inline size_t dtype_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

inline HostInput make_input(const std::vector<float>& x, DType dtype) {
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

inline const char* dtype_name(DType dtype) {
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

inline std::vector<float> random_values(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

inline constexpr std::array<size_t, 8> kSizes = {
    0, 1, 5, kTileValues - 1, kTileValues, kTileValues + 1, 3 * kTileValues + 7, size_t{1} << 20};

}  // namespace threelc::compression::cuda_codec_test
