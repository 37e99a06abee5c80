// The 3LC codec: encode with fused error feedback, decode, decode-accumulate, and raw fp32.
// Single-threaded and allocation-free on the hot path. It knows nothing of ranks or sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "threelc/compression/block_format.h"
#include "threelc/compression/status.h"

namespace threelc::compression {

enum class DType : uint8_t { kFloat32, kFloat16, kBFloat16 };

// Instruction set of the kernels. kAuto picks the best one this CPU supports.
enum class Isa : uint8_t { kAuto, kScalar, kAvx2, kAvx512 };

std::string_view isa_name(Isa isa);
// The ISA that kAuto resolves to on this CPU (honours THREELC_CODEC_ISA when set to a
// supported value, so one can force the scalar reference).
Isa detected_isa();
bool isa_supported(Isa isa);
// Every ISA this CPU can run, scalar first.
std::vector<Isa> supported_isas();

struct Values {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  size_t count = 0;
};

struct EncodeOptions {
  float sparsity = 1.0f;  // the sparsity multiplier s, in [1, 2)
  Isa isa = Isa::kAuto;
  // Values that share one scale: 0 writes format v1 (one scale per block, the paper's 3LC);
  // otherwise format v2 with a scale per tile of this many values, a multiple of 5 from 5 to
  // kTileValues (docs/WIRE_FORMAT.md).
  size_t scale_tile = 0;
};

// Whether `scale_tile` is one EncodeOptions accepts (0, or a multiple of 5 up to kTileValues).
bool scale_tile_valid(size_t scale_tile);

// The checks every encoder makes of its options (sparsity in [1, 2), a valid scale tile): a
// failure names the option and its value.
Status check_encode_options(const EncodeOptions& options);

struct EncodedBlock {
  size_t bytes = 0;  // bytes written to the output
  Format format = Format::kRaw;
  float scale = 0.0f;  // M * s (v2: the largest tile's)
};

// Encodes `values` as one 3LC block with error feedback. `residual` (the error-feedback memory:
// fp32, values.count elements, updated in place) may be null: then it is taken as zero and
// nothing is written back. Non-finite input (or a scale that overflows) produces a raw block
// and leaves `residual` untouched. `out` must hold max_block_bytes(values.count).
Status encode(const Values& values, float* residual, const EncodeOptions& options,
              std::span<uint8_t> out, EncodedBlock* result);

// max |values[i]| (fp16/bf16 widened), computed with the same SIMD kernel as the encoder's
// first pass (on bit patterns with the sign cleared): NaN if any value is NaN, else +Inf if any
// is infinite; 0 for no values. Reads only; `values.data` must hold values.count values.
float max_abs(const Values& values, Isa isa = Isa::kAuto);

// Encodes `values` as a raw fp32 block (fp16/bf16 are widened). `out` must hold
// raw_block_bytes(values.count).
Status encode_raw(const Values& values, std::span<uint8_t> out, EncodedBlock* result);

struct BlockInfo {
  Format format = Format::kRaw;
  uint32_t count = 0;
  float scale = 0.0f;  // the header's (v2: the largest tile scale)
  uint32_t payload_bytes = 0;
  size_t tile_values = kTileValues;  // values per tile (v2: from the header)
};

// Checks every header field, the tile table, and that every tile expands to exactly its
// groups. `expected_count` is the number of values the receiver expects, or kAnyCount.
inline constexpr size_t kAnyCount = static_cast<size_t>(-1);
Status validate(std::span<const uint8_t> block, size_t expected_count, BlockInfo* info);

struct DecodeOptions {
  Isa isa = Isa::kAuto;
};

// dst[i] = decoded[i] for all i < count. The block is validated completely before the first
// write, so on error dst is untouched.
Status decode(std::span<const uint8_t> block, size_t expected_count, float* dst,
              const DecodeOptions& options = {});

// dst[i] += alpha * decoded[i], computed as fp32 multiply then fp32 add (no FMA). In a 3LC
// block, zero trits leave dst[i] as it is (a -0.0 stays -0.0); a raw block adds alpha * x[i]
// to every element. Validated before the first write.
Status decode_add(std::span<const uint8_t> block, size_t expected_count, float alpha, float* dst,
                  const DecodeOptions& options = {});

}  // namespace threelc::compression
