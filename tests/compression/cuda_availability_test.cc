// Where there is no usable CUDA device (these CI machines: CUDA calls fail with error 35) or the
// build has no CUDA codec, the CUDA codec says so: device_count() is 0 with a reason, and calls
// fail with a Status naming the cause instead of crashing. On a machine with a GPU this test
// skips; tests/compression/gpu/cuda_codec_test.cc covers the codec there.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "threelc/compression/codec.h"
#include "threelc/compression/cuda_codec.h"

namespace threelc::compression {
namespace {

TEST(CudaCodecAvailability, NoDeviceIsReportedWithAReason) {
  std::string why;
  const int devices = cuda::device_count(&why);
  if (devices > 0) GTEST_SKIP() << devices << " CUDA device(s): cuda_codec_tests covers them";
  EXPECT_EQ(devices, 0);
  EXPECT_NE(why.find(cuda::built() ? "no CUDA device" : "no CUDA support"), std::string::npos)
      << why;
}

TEST(CudaCodecAvailability, CallsWithoutADeviceFailWithTheCause) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  cuda::Workspace workspace;
  // A pointer no call may dereference: the codec must fail before it touches memory.
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an address no call may dereference, on purpose
  const auto* nowhere = reinterpret_cast<const float*>(uintptr_t{4096});
  std::vector<uint8_t> block(max_block_bytes(10));
  EncodedBlock result;
  Status status = cuda::encode_to_host(cuda::DeviceValues{nowhere, DType::kFloat32, 10}, nullptr,
                                       EncodeOptions{}, workspace, nullptr, block, &result);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("CUDA"), std::string::npos) << status.message();

  // A valid block passes the host-side validation, then the device step fails.
  const std::vector<float> values(10, 1.0f);
  ASSERT_TRUE(encode(Values{values.data(), DType::kFloat32, values.size()}, nullptr,
                     EncodeOptions{}, block, &result)
                  .ok());
  status = cuda::decode_add_from_host(std::span<const uint8_t>(block.data(), result.bytes), 10,
                                      1.0f, const_cast<float*>(nowhere), workspace, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("CUDA"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace threelc::compression
