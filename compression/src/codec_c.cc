// The codec's C ABI over the C++ API (threelc/codec.h).
#include "threelc/codec.h"

#include <cstdint>
#include <string>

#include "threelc/compression/codec.h"
#include "threelc/compression/settings.h"

namespace {

using threelc::compression::Status;
namespace tc = threelc::compression;

thread_local std::string last_error;

int fail(int code, std::string message) {
  last_error = std::move(message);
  return code;
}

int report(const Status& status, int code) {
  if (status.ok()) return THREELC_OK;
  return fail(code, status.message());
}

// THREELC_CODEC_ISA, when malformed, refuses every encode and decode (naming the variable).
int check_settings() { return report(tc::codec_settings_status(), THREELC_EINVAL); }

bool to_dtype(int dtype, tc::DType* out) {
  switch (dtype) {
    case THREELC_FLOAT32:
      *out = tc::DType::kFloat32;
      return true;
    case THREELC_FLOAT16:
      *out = tc::DType::kFloat16;
      return true;
    case THREELC_BFLOAT16:
      *out = tc::DType::kBFloat16;
      return true;
    default:
      return false;
  }
}

int bad_dtype(int dtype) {
  return fail(THREELC_EINVAL, "dtype " + std::to_string(dtype) +
                                  " cannot be compressed (float32, float16 or bfloat16 only)");
}

// Null pointers are the caller's mistake (EINVAL), not a malformed block. A null destination
// is allowed only for a block of zero values, which the decoder then checks.
int check_block_and_destination(const void* block, size_t block_bytes, const float* dst) {
  if (block == nullptr && block_bytes != 0) return fail(THREELC_EINVAL, "block pointer is null");
  if (dst == nullptr && block_bytes > threelc::compression::kHeaderBytes) {
    return fail(THREELC_EINVAL, "destination pointer is null");
  }
  return THREELC_OK;
}

std::span<const uint8_t> block_span(const void* block, size_t bytes) {
  return {static_cast<const uint8_t*>(block), block == nullptr ? 0 : bytes};
}

}  // namespace

extern "C" {

size_t threelc_codec_max_block_bytes(size_t count) { return tc::max_block_bytes(count); }

int threelc_codec_encode_tiled(const void* values, int dtype, size_t count, float* residual,
                               float sparsity, size_t scale_tile, void* out, size_t out_capacity,
                               size_t* block_bytes) {
  if (int code = check_settings(); code != THREELC_OK) return code;
  tc::DType type;
  if (!to_dtype(dtype, &type)) return bad_dtype(dtype);
  if (out == nullptr || block_bytes == nullptr)
    return fail(THREELC_EINVAL, "output pointer is null");
  tc::EncodedBlock result;
  const Status status =
      tc::encode({values, type, count}, residual, {.sparsity = sparsity, .scale_tile = scale_tile},
                 {static_cast<uint8_t*>(out), out_capacity}, &result);
  if (status.ok()) *block_bytes = result.bytes;
  return report(status, THREELC_EINVAL);
}

int threelc_codec_encode(const void* values, int dtype, size_t count, float* residual,
                         float sparsity, void* out, size_t out_capacity, size_t* block_bytes) {
  return threelc_codec_encode_tiled(values, dtype, count, residual, sparsity, 0, out, out_capacity,
                                    block_bytes);
}

int threelc_codec_encode_raw(const void* values, int dtype, size_t count, void* out,
                             size_t out_capacity, size_t* block_bytes) {
  if (int code = check_settings(); code != THREELC_OK) return code;
  tc::DType type;
  if (!to_dtype(dtype, &type)) return bad_dtype(dtype);
  if (out == nullptr || block_bytes == nullptr)
    return fail(THREELC_EINVAL, "output pointer is null");
  tc::EncodedBlock result;
  const Status status =
      tc::encode_raw({values, type, count}, {static_cast<uint8_t*>(out), out_capacity}, &result);
  if (status.ok()) *block_bytes = result.bytes;
  return report(status, THREELC_EINVAL);
}

int threelc_codec_inspect(const void* block, size_t block_bytes, uint32_t* count, int* format,
                          float* scale) {
  if (block == nullptr && block_bytes != 0) return fail(THREELC_EINVAL, "block pointer is null");
  tc::BlockInfo info;
  const Status status = tc::validate(block_span(block, block_bytes), tc::kAnyCount, &info);
  if (!status.ok()) return report(status, THREELC_EMALFORMED);
  if (count != nullptr) *count = info.count;
  if (format != nullptr) *format = static_cast<int>(info.format);
  if (scale != nullptr) *scale = info.scale;
  return THREELC_OK;
}

int threelc_codec_decode(const void* block, size_t block_bytes, size_t expected_count, float* dst) {
  if (int code = check_settings(); code != THREELC_OK) return code;
  if (int code = check_block_and_destination(block, block_bytes, dst); code != THREELC_OK) {
    return code;
  }
  return report(tc::decode(block_span(block, block_bytes), expected_count, dst),
                THREELC_EMALFORMED);
}

int threelc_codec_decode_add(const void* block, size_t block_bytes, size_t expected_count,
                             float alpha, float* dst) {
  if (int code = check_settings(); code != THREELC_OK) return code;
  if (int code = check_block_and_destination(block, block_bytes, dst); code != THREELC_OK) {
    return code;
  }
  return report(tc::decode_add(block_span(block, block_bytes), expected_count, alpha, dst),
                THREELC_EMALFORMED);
}

const char* threelc_codec_isa(void) { return tc::isa_name(tc::detected_isa()).data(); }

const char* threelc_codec_last_error(void) { return last_error.c_str(); }

}  // extern "C"
