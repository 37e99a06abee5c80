// The codec's C ABI (threelc/codec.h): encode and decode round trips in formats v1 and v2, error
// codes and the per-thread last error message.
#include <gtest/gtest.h>

#include "invariants.h"

namespace threelc::compression::invariants {
namespace {

TEST(CodecCApi, EncodeDecodeRoundTrip) {
  const std::vector<float> x = {0.75f, -0.75f, 0.25f, -1.0f};
  std::vector<float> e(4, 0.0f);
  EXPECT_EQ(threelc_codec_max_block_bytes(4), 32u);
  Bytes out(threelc_codec_max_block_bytes(4));
  size_t bytes = 0;
  ASSERT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 4, e.data(), 1.0f, out.data(),
                                 out.size(), &bytes),
            THREELC_OK)
      << threelc_codec_last_error();
  EXPECT_EQ(bytes, 19u);
  EXPECT_EQ(e, (std::vector<float>{-0.25f, 0.25f, 0.25f, 0.0f}));
  uint32_t count = 0;
  int format = -1;
  float scale = 0.0f;
  ASSERT_EQ(threelc_codec_inspect(out.data(), bytes, &count, &format, &scale), THREELC_OK);
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(format, 1);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(threelc_codec_inspect(out.data(), bytes, nullptr, nullptr, nullptr), THREELC_OK);
  std::vector<float> d(4);
  ASSERT_EQ(threelc_codec_decode(out.data(), bytes, 4, d.data()), THREELC_OK);
  EXPECT_EQ(d, (std::vector<float>{1.0f, -1.0f, 0.0f, -1.0f}));
  ASSERT_EQ(threelc_codec_decode(out.data(), bytes, SIZE_MAX, d.data()), THREELC_OK);
  std::vector<float> acc = {1.0f, 1.0f, -0.0f, 1.0f};
  ASSERT_EQ(threelc_codec_decode_add(out.data(), bytes, 4, 0.5f, acc.data()), THREELC_OK);
  EXPECT_EQ(acc, (std::vector<float>{1.5f, 0.5f, 0.0f, 0.5f}));
  EXPECT_EQ(bits_of(acc[2]), 0x80000000u);

  // Half-precision inputs and raw encoding.
  const std::vector<uint16_t> half = {0x3A00, 0xBA00, 0x3400, 0xBC00};
  Bytes out16(threelc_codec_max_block_bytes(4));
  size_t bytes16 = 0;
  ASSERT_EQ(threelc_codec_encode(half.data(), THREELC_FLOAT16, 4, nullptr, 1.0f, out16.data(),
                                 out16.size(), &bytes16),
            THREELC_OK);
  EXPECT_EQ(Bytes(out16.begin(), out16.begin() + 19), Bytes(out.begin(), out.begin() + 19));
  const std::vector<uint16_t> brain = {0x3F80, 0xC000};
  Bytes raw(24);
  size_t raw_bytes = 0;
  ASSERT_EQ(threelc_codec_encode_raw(brain.data(), THREELC_BFLOAT16, 2, raw.data(), raw.size(),
                                     &raw_bytes),
            THREELC_OK);
  EXPECT_EQ(raw_bytes, 24u);
  ASSERT_EQ(threelc_codec_inspect(raw.data(), raw_bytes, &count, &format, &scale), THREELC_OK);
  EXPECT_EQ(format, 0);
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(threelc_codec_decode(raw.data(), raw_bytes, 2, d.data()), THREELC_OK);
  EXPECT_EQ(d[0], 1.0f);
  EXPECT_EQ(d[1], -2.0f);

  const std::string isa = threelc_codec_isa();
  EXPECT_TRUE(isa == "scalar" || isa == "avx2" || isa == "avx512") << isa;
}

TEST(CodecCApi, EncodeTiled) {
  // 7 values, scale_tile 5: tiles {0..4} (scale 2) and {5, 6} (scale 0.5); the same block and
  // error as the C++ encoder's, format 2 with the larger scale in the header.
  const std::vector<float> x = {2.0f, -1.5f, 0.5f, 1.25f, 0.0f, 0.5f, -0.125f};
  std::vector<float> e(7, 0.0f), e_cpp(7, 0.0f);
  Bytes out(threelc_codec_max_block_bytes(7));
  size_t bytes = 0;
  ASSERT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, e.data(), 1.0f, 5, out.data(),
                                       out.size(), &bytes),
            THREELC_OK)
      << threelc_codec_last_error();
  EncodedBlock result;
  const Bytes cpp = encode_or_die(Values{x.data(), DType::kFloat32, 7}, e_cpp.data(), 1.0f,
                                  Isa::kAuto, &result, 5);
  ASSERT_EQ(bytes, 16u + 6u * 2u + 2u);
  EXPECT_EQ(Bytes(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(bytes)), cpp);
  EXPECT_EQ(e, e_cpp);
  EXPECT_EQ(e, (std::vector<float>{0.0f, 0.5f, 0.5f, -0.75f, 0.0f, 0.0f, -0.125f}));
  uint32_t count = 0;
  int format = -1;
  float scale = 0.0f;
  ASSERT_EQ(threelc_codec_inspect(out.data(), bytes, &count, &format, &scale), THREELC_OK);
  EXPECT_EQ(count, 7u);
  EXPECT_EQ(format, 2);
  EXPECT_EQ(scale, 2.0f);
  std::vector<float> d(7);
  ASSERT_EQ(threelc_codec_decode(out.data(), bytes, 7, d.data()), THREELC_OK);
  EXPECT_EQ(d, (std::vector<float>{2.0f, -2.0f, 0.0f, 2.0f, 0.0f, 0.5f, 0.0f}));
  std::vector<float> acc(7, 1.0f);
  ASSERT_EQ(threelc_codec_decode_add(out.data(), bytes, 7, 0.5f, acc.data()), THREELC_OK);
  EXPECT_EQ(acc, (std::vector<float>{2.0f, 0.0f, 1.0f, 2.0f, 1.0f, 1.25f, 1.0f}));

  // fp16 input gives the same block; scale_tile 0 is threelc_codec_encode.
  const std::vector<uint16_t> half = {0x4000, 0xBE00, 0x3800, 0x3D00, 0x0000, 0x3800, 0xB000};
  Bytes out16(threelc_codec_max_block_bytes(7));
  size_t bytes16 = 0;
  ASSERT_EQ(threelc_codec_encode_tiled(half.data(), THREELC_FLOAT16, 7, nullptr, 1.0f, 5,
                                       out16.data(), out16.size(), &bytes16),
            THREELC_OK);
  EXPECT_EQ(Bytes(out16.begin(), out16.begin() + static_cast<std::ptrdiff_t>(bytes16)), cpp);
  Bytes v1(threelc_codec_max_block_bytes(7)), v1_tiled(threelc_codec_max_block_bytes(7));
  size_t v1_bytes = 0, v1_tiled_bytes = 0;
  ASSERT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 7, nullptr, 1.5f, v1.data(), v1.size(),
                                 &v1_bytes),
            THREELC_OK);
  ASSERT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 1.5f, 0,
                                       v1_tiled.data(), v1_tiled.size(), &v1_tiled_bytes),
            THREELC_OK);
  EXPECT_EQ(v1_bytes, v1_tiled_bytes);
  EXPECT_EQ(v1, v1_tiled);
  EXPECT_EQ(v1[0], 1);

  // Refusals: EINVAL and a message naming the argument; nothing written.
  auto last = [] { return std::string(threelc_codec_last_error()); };
  for (size_t scale_tile : {size_t{3}, size_t{7}, size_t{20485}}) {
    Bytes untouched(threelc_codec_max_block_bytes(7), 0xAB);
    std::vector<float> e_kept(7, 0.25f);
    EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, e_kept.data(), 1.0f,
                                         scale_tile, untouched.data(), untouched.size(), &bytes),
              THREELC_EINVAL);
    EXPECT_NE(last().find("scale tile of " + std::to_string(scale_tile)), std::string::npos)
        << last();
    EXPECT_EQ(untouched, Bytes(threelc_codec_max_block_bytes(7), 0xAB));
    EXPECT_EQ(e_kept, std::vector<float>(7, 0.25f));
  }
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_INT32, 7, nullptr, 1.0f, 5, out.data(),
                                       out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("dtype"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 1.0f, 5, nullptr,
                                       out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 2.0f, 5, out.data(),
                                       out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("sparsity"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_tiled(x.data(), THREELC_FLOAT32, 7, nullptr, 1.0f, 5, out.data(),
                                       out.size() - 1, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("output buffer"), std::string::npos) << last();
}

TEST(CodecCApi, ErrorCodesAndMessages) {
  const std::vector<float> x = {1.0f, 2.0f};
  Bytes out(threelc_codec_max_block_bytes(2));
  size_t bytes = 0;
  auto last = [] { return std::string(threelc_codec_last_error()); };

  for (int dtype :
       std::initializer_list<int>{THREELC_UINT8, THREELC_INT8, THREELC_INT16, THREELC_INT32,
                                  THREELC_INT64, THREELC_FLOAT64, THREELC_BOOL, 42, -1}) {
    EXPECT_EQ(
        threelc_codec_encode(x.data(), dtype, 2, nullptr, 1.0f, out.data(), out.size(), &bytes),
        THREELC_EINVAL);
    EXPECT_NE(last().find("dtype"), std::string::npos) << last();
    EXPECT_EQ(threelc_codec_encode_raw(x.data(), dtype, 2, out.data(), out.size(), &bytes),
              THREELC_EINVAL);
    EXPECT_NE(last().find("dtype"), std::string::npos) << last();
  }
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 2.0f, out.data(),
                                 out.size(), &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("sparsity"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, nullptr, 100, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, out.data(),
                                 out.size(), nullptr),
            THREELC_EINVAL);
  EXPECT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, out.data(),
                                 out.size() - 1, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("output buffer"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_raw(x.data(), THREELC_FLOAT32, 2, out.data(), 23, &bytes),
            THREELC_EINVAL);
  EXPECT_NE(last().find("output buffer"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_encode_raw(x.data(), THREELC_FLOAT32, 2, nullptr, 24, &bytes),
            THREELC_EINVAL);

  // Malformed blocks: -2 and a message.
  ASSERT_EQ(threelc_codec_encode(x.data(), THREELC_FLOAT32, 2, nullptr, 1.0f, out.data(),
                                 out.size(), &bytes),
            THREELC_OK);
  std::vector<float> d = {5.0f, 5.0f};
  EXPECT_EQ(threelc_codec_decode(out.data(), bytes, 3, d.data()), THREELC_EMALFORMED);
  EXPECT_NE(last().find("expects 3"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_decode_add(out.data(), bytes - 1, 2, 1.0f, d.data()), THREELC_EMALFORMED);
  EXPECT_NE(last().find("payload"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_inspect(out.data(), 10, nullptr, nullptr, nullptr), THREELC_EMALFORMED);
  EXPECT_NE(last().find("header"), std::string::npos) << last();
  // Null pointers are bad arguments (-1); a null, empty block is merely too short (-2).
  EXPECT_EQ(threelc_codec_inspect(nullptr, 100, nullptr, nullptr, nullptr), THREELC_EINVAL);
  EXPECT_NE(last().find("block pointer is null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_decode(nullptr, 0, SIZE_MAX, d.data()), THREELC_EMALFORMED);
  EXPECT_EQ(d, (std::vector<float>{5.0f, 5.0f}));
  // A null destination is a bad argument.
  EXPECT_EQ(threelc_codec_decode(out.data(), bytes, 2, nullptr), THREELC_EINVAL);
  EXPECT_NE(last().find("destination pointer is null"), std::string::npos) << last();
  EXPECT_EQ(threelc_codec_decode_add(out.data(), bytes, 2, 1.0f, nullptr), THREELC_EINVAL);

  // last_error is per thread: a fresh thread sees "".
  std::string other = "unset";
  std::thread([&] { other = threelc_codec_last_error(); }).join();
  EXPECT_EQ(other, "");
}

}  // namespace
}  // namespace threelc::compression::invariants
