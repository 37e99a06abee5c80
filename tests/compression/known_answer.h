// What the known-answer tests share: blocks assembled from hand-derived bytes, a block's
// header fields, and the encode that checks every ISA gives the same block.
//
// Construction used throughout: max |x + e| = 1.0 and s = 1.0, so scale = 1.0 (f32 bits
// 0x3F800000, little-endian bytes 00 00 80 3F) and h = 0.5. Then 0.75 and 1.0 quantize to +1
// (trit 2), -0.75 and -1.0 to -1 (trit 0), 0.25, 0.5, 0 and -0.5 to 0 (trit 1).
// A group byte is 81*t0 + 27*t1 + 9*t2 + 3*t3 + t4 with t = q + 1; all zero is 121; a group with
// only its first element +1 is 162 + 40 = 202, with only its first element -1 it is 40.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_support.h"
#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"

namespace threelc::compression::known_answer {

using test_support::bits_of;
using test_support::Bytes;
using test_support::float_of;
using test_support::put_u16;
using test_support::put_u32;
using test_support::put_u8;
using test_support::tiled_block;

// A 3LC block from its header fields, tile lengths and concatenated tile bytes.
inline Bytes threelc_block(uint32_t n, uint32_t scale_bits, const std::vector<Bytes>& tiles) {
  Bytes out;
  uint32_t payload = 0;
  for (const Bytes& t : tiles) payload += static_cast<uint32_t>(t.size());
  put_u8(out, 1);   // format: 3LC v1
  put_u8(out, 0);   // flags
  put_u16(out, 0);  // reserved
  put_u32(out, n);
  put_u32(out, scale_bits);
  put_u32(out, payload);
  for (const Bytes& t : tiles) put_u16(out, static_cast<uint16_t>(t.size()));
  for (const Bytes& t : tiles) out.insert(out.end(), t.begin(), t.end());
  return out;
}

inline Bytes repeat(uint8_t byte, size_t times) { return Bytes(times, byte); }

inline Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

inline std::string isa_label(Isa isa) { return std::string(isa_name(isa)); }

// Encodes fp32 values with the given prior error (updated in place) on one ISA; scale_tile 0
// is format v1, otherwise v2 with a scale per tile of that many values.
inline Bytes encode_f32(const std::vector<float>& x, std::vector<float>* error, float sparsity,
                        Isa isa, EncodedBlock* result, size_t scale_tile = 0) {
  Bytes out(max_block_bytes(x.size()), 0xEE);
  const Status status = encode(Values{x.data(), DType::kFloat32, x.size()},
                               error != nullptr ? error->data() : nullptr,
                               EncodeOptions{sparsity, isa, scale_tile}, out, result);
  EXPECT_TRUE(status.ok()) << status.message();
  EXPECT_LE(result->bytes, out.size());
  out.resize(result->bytes);
  return out;
}

// Header fields read back by hand from the expected layout.
struct Fields {
  uint8_t format, flags;
  uint16_t reserved;
  uint32_t count, scale_bits, payload_bytes;
};
inline Fields fields_of(const Bytes& block) {
  EXPECT_GE(block.size(), 16u);
  Fields f{};
  f.format = block[0];
  f.flags = block[1];
  f.reserved = static_cast<uint16_t>(block[2] | block[3] << 8);
  auto u32 = [&](size_t at) {
    return static_cast<uint32_t>(block[at]) | static_cast<uint32_t>(block[at + 1]) << 8 |
           static_cast<uint32_t>(block[at + 2]) << 16 | static_cast<uint32_t>(block[at + 3]) << 24;
  };
  f.count = u32(4);
  f.scale_bits = u32(8);
  f.payload_bytes = u32(12);
  return f;
}

// Encodes x (with prior error e_old, scale_tile as in EncodeOptions) on every ISA this CPU runs
// and checks the block against `expected`, the error afterwards against `expected_error`, and
// the decoded values.
inline void check_known_answer(const std::vector<float>& x, const std::vector<float>& e_old,
                               float sparsity, const Bytes& expected,
                               const std::vector<float>& expected_error,
                               const std::vector<float>& expected_decoded, size_t scale_tile = 0) {
  ASSERT_EQ(x.size(), e_old.size());
  ASSERT_EQ(x.size(), expected_error.size());
  ASSERT_EQ(x.size(), expected_decoded.size());
  // One ISA per call, so that a failing ISA does not hide the results of the others.
  auto check_isa = [&](Isa isa) {
    std::vector<float> e = e_old;
    EncodedBlock result;
    const Bytes block = encode_f32(x, &e, sparsity, isa, &result, scale_tile);
    for (size_t i = 0; i < std::min(block.size(), expected.size()); ++i) {
      ASSERT_EQ(block[i], expected[i]) << "byte " << i << " of " << expected.size();
    }
    ASSERT_EQ(block.size(), expected.size());
    const Fields f = fields_of(expected);
    EXPECT_EQ(result.format, static_cast<Format>(f.format));
    EXPECT_EQ(bits_of(result.scale), f.scale_bits);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits_of(e[i]), bits_of(expected_error[i]))
          << "error[" << i << "] = " << e[i] << ", expected " << expected_error[i];
    }
    // Without an error buffer the block is the same when e_old is all zero.
    bool zero_error = true;
    for (float v : e_old) zero_error = zero_error && v == 0.0f;
    if (zero_error) {
      EncodedBlock no_error;
      EXPECT_EQ(encode_f32(x, nullptr, sparsity, isa, &no_error, scale_tile), expected);
    }

    BlockInfo info;
    const Status valid = validate(expected, x.size(), &info);
    ASSERT_TRUE(valid.ok()) << valid.message();
    EXPECT_EQ(info.count, x.size());
    EXPECT_EQ(bits_of(info.scale), f.scale_bits);
    EXPECT_EQ(info.payload_bytes, f.payload_bytes);
    EXPECT_EQ(info.tile_values, f.format == 2 ? size_t{5} * f.reserved : kTileValues);

    std::vector<float> decoded(x.size(), 12345.0f);
    const Status status = decode(expected, x.size(), decoded.data(), DecodeOptions{isa});
    ASSERT_TRUE(status.ok()) << status.message();
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits_of(decoded[i]), bits_of(expected_decoded[i])) << "decoded[" << i << "]";
    }
  };
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    check_isa(isa);
  }
}

// Scale 1.0: the bytes 00 00 80 3F.
inline constexpr uint32_t kOne = 0x3F800000u;

// Encodes the same values given as fp16 (`half`) and as bf16 (`brain`), with a zero prior
// error, on every ISA, and checks the block and the error afterwards.
inline void check_half_inputs(const std::vector<uint16_t>& half, const std::vector<uint16_t>& brain,
                              size_t scale_tile, const Bytes& expected,
                              const std::vector<float>& expected_error) {
  ASSERT_EQ(half.size(), brain.size());
  const size_t n = half.size();
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE("isa " + isa_label(isa));
    for (const auto& [dtype, data] :
         {std::pair{DType::kFloat16, &half}, std::pair{DType::kBFloat16, &brain}}) {
      std::vector<float> e(n, 0.0f);
      Bytes out(max_block_bytes(n));
      EncodedBlock result;
      ASSERT_TRUE(encode(Values{data->data(), dtype, n}, e.data(),
                         EncodeOptions{1.0f, isa, scale_tile}, out, &result)
                      .ok());
      out.resize(result.bytes);
      EXPECT_EQ(out, expected);
      EXPECT_EQ(e, expected_error);
    }
  }
}

}  // namespace threelc::compression::known_answer
