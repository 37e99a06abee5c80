/* C ABI of the threelc codec (3LC block formats v1 and v2). Stable; see docs/WIRE_FORMAT.md.
 * Every function returns 0 on success or a negative THREELC_E* code; on failure
 * threelc_codec_last_error() returns a message for the calling thread. */
#ifndef THREELC_CODEC_H_
#define THREELC_CODEC_H_

#include <stddef.h>
#include <stdint.h>

#include "threelc/error_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Data types; the same numbering is used by the engine's C ABI. Part of the ABI: values never
 * change, new types are added at the end. */
typedef enum threelc_dtype {
  THREELC_UINT8 = 0,
  THREELC_INT8 = 1,
  THREELC_INT32 = 2,
  THREELC_INT64 = 3,
  THREELC_FLOAT16 = 4,
  THREELC_BFLOAT16 = 5,
  THREELC_FLOAT32 = 6,
  THREELC_FLOAT64 = 7,
  THREELC_INT16 = 8,
  THREELC_BOOL = 9 /* one byte, 0 or 1: broadcast, allgathered and exchanged, never reduced */
} threelc_dtype;

/* THREELC_OK, THREELC_EINVAL (a bad argument: dtype, sparsity, null pointer, small buffer),
 * THREELC_EMALFORMED (a block that does not follow the format): threelc/error_codes.h. */

/* Bytes that any block of `count` values may need. */
size_t threelc_codec_max_block_bytes(size_t count);

/* Encodes `count` values of `dtype` (FLOAT32, FLOAT16 or BFLOAT16) as a 3LC block (format v1,
 * one scale). `residual` (the error-feedback memory, `count` floats, updated in place) may be
 * NULL. Writes the block size to *block_bytes. */
int threelc_codec_encode(const void* values, int dtype, size_t count, float* residual,
                         float sparsity, void* out, size_t out_capacity, size_t* block_bytes);

/* The same with a scale per tile of `scale_tile` values (format v2; a multiple of 5 up to
 * 20480); scale_tile 0 is threelc_codec_encode. */
int threelc_codec_encode_tiled(const void* values, int dtype, size_t count, float* residual,
                               float sparsity, size_t scale_tile, void* out, size_t out_capacity,
                               size_t* block_bytes);

/* Encodes the values as a raw fp32 block. */
int threelc_codec_encode_raw(const void* values, int dtype, size_t count, void* out,
                             size_t out_capacity, size_t* block_bytes);

/* Validates a block; writes its value count, format (0 raw, 1 3LC v1, 2 3LC v2) and scale
 * (v2: the largest tile scale). */
int threelc_codec_inspect(const void* block, size_t block_bytes, uint32_t* count, int* format,
                          float* scale);

/* dst[i] = decoded[i]; `expected_count` values (SIZE_MAX: take the header's count). */
int threelc_codec_decode(const void* block, size_t block_bytes, size_t expected_count, float* dst);

/* dst[i] += alpha * decoded[i]. */
int threelc_codec_decode_add(const void* block, size_t block_bytes, size_t expected_count,
                             float alpha, float* dst);

/* Name of the kernels in use: "scalar", "avx2" or "avx512". */
const char* threelc_codec_isa(void);

/* Message of the last failure on this thread ("" if none). */
const char* threelc_codec_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* THREELC_CODEC_H_ */
