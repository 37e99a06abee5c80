// threelc-bench codec --gradients: replays recorded gradients with error feedback carried
// across steps per tensor and prints the compression ratio for each sparsity.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "codec_bench.h"
#include "threelc/compression/codec.h"

namespace codec_bench {

namespace {

namespace tc = threelc::compression;

struct GradientFile {
  std::FILE* f = nullptr;
  std::vector<uint64_t> counts;
  uint32_t steps = 0;
  long data_offset = 0;
  ~GradientFile() {
    if (f != nullptr) std::fclose(f);
  }
};

bool open_gradients(const std::string& path, GradientFile* g) {
  g->f = std::fopen(path.c_str(), "rb");
  if (g->f == nullptr) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    return false;
  }
  char magic[8];
  uint32_t tensors = 0;
  if (std::fread(magic, 1, 8, g->f) != 8 || std::memcmp(magic, "TLCGRAD1", 8) != 0 ||
      std::fread(&tensors, 4, 1, g->f) != 1 || std::fread(&g->steps, 4, 1, g->f) != 1) {
    std::fprintf(stderr, "%s: not a TLCGRAD1 file\n", path.c_str());
    return false;
  }
  g->counts.resize(tensors);
  if (tensors != 0 && std::fread(g->counts.data(), 8, tensors, g->f) != tensors) {
    std::fprintf(stderr, "%s: truncated tensor table\n", path.c_str());
    return false;
  }
  for (uint64_t c : g->counts) {
    if (c > UINT32_MAX) {
      std::fprintf(stderr, "%s: tensor of %llu values exceeds a block\n", path.c_str(),
                   static_cast<unsigned long long>(c));
      return false;
    }
  }
  g->data_offset = std::ftell(g->f);
  return true;
}

}  // namespace

int run_ratio(const Options& opt) {
  GradientFile file;
  if (!open_gradients(opt.gradients, &file)) return 1;
  tc::Isa isa = tc::Isa::kAuto;
  if (opt.isa != "all" && !parse_isa(opt.isa, &isa)) {
    std::fprintf(stderr, "unknown --isa %s\n", opt.isa.c_str());
    return 2;
  }
  uint64_t max_count = 0, total = 0;
  for (uint64_t c : file.counts) {
    max_count = std::max(max_count, c);
    total += c;
  }
  std::vector<float> values(max_count);
  std::vector<uint8_t> block(tc::max_block_bytes(max_count));
  for (float s : opt.sparsities) {
    if (std::fseek(file.f, file.data_offset, SEEK_SET) != 0) return 1;
    std::vector<std::vector<float>> residuals;
    for (uint64_t c : file.counts) residuals.emplace_back(c, 0.0f);
    uint64_t encoded = 0, count = 0, raw_blocks = 0, zero_values = 0;
    for (uint32_t step = 0; step < file.steps; ++step) {
      for (size_t t = 0; t < file.counts.size(); ++t) {
        const size_t n = file.counts[t];
        if (n != 0 && std::fread(values.data(), 4, n, file.f) != n) {
          std::fprintf(stderr, "%s: truncated at step %u tensor %zu\n", opt.gradients.c_str(), step,
                       t);
          return 1;
        }
        tc::EncodedBlock result;
        tc::EncodeOptions eopt;
        eopt.sparsity = s;
        eopt.scale_tile = opt.scale_tile;
        eopt.isa = isa;
        const tc::Status status =
            tc::encode(tc::Values{values.data(), tc::DType::kFloat32, n}, residuals[t].data(), eopt,
                       std::span<uint8_t>(block.data(), tc::max_block_bytes(n)), &result);
        if (!status.ok()) {
          std::fprintf(stderr, "encode: %s\n", status.message().c_str());
          return 1;
        }
        if (result.format == tc::Format::kRaw) ++raw_blocks;
        // tc::Values that decode to zero (the sparsity actually reached).
        if (result.format == tc::Format::kThreeLC && n != 0) {
          std::vector<float> decoded(n);
          if (!tc::decode(std::span<const uint8_t>(block.data(), result.bytes), n, decoded.data())
                   .ok()) {
            return 1;
          }
          for (float v : decoded) zero_values += v == 0.0f ? 1u : 0u;
        }
        encoded += result.bytes;
        count += n;
      }
    }
    const double bits =
        count != 0 ? 8.0 * static_cast<double>(encoded) / static_cast<double>(count) : 0.0;
    const double ratio = bits > 0 ? 32.0 / bits : 0.0;
    const double zero_fraction =
        count != 0 ? static_cast<double>(zero_values) / static_cast<double>(count) : 0.0;
    if (opt.json) {
      std::printf(
          "{\"op\":\"ratio\",\"sparsity\":%.4g,\"scale_tile\":%zu,\"bits_per_value\":%.6f,"
          "\"compression_ratio\":%.4f,\"values\":%llu,\"encoded_bytes\":%llu,"
          "\"tensors\":%zu,\"steps\":%u,\"raw_blocks\":%llu,\"zero_fraction\":%.6f}\n",
          static_cast<double>(s), opt.scale_tile, bits, ratio,
          static_cast<unsigned long long>(count), static_cast<unsigned long long>(encoded),
          file.counts.size(), file.steps, static_cast<unsigned long long>(raw_blocks),
          zero_fraction);
    } else {
      std::printf(
          "ratio s=%-5.3g bits/value %8.4f  compression %8.2fx  zero values %6.2f%%  "
          "(%llu values, %zu tensors x %u steps, %llu raw blocks)\n",
          static_cast<double>(s), bits, ratio, 100.0 * zero_fraction,
          static_cast<unsigned long long>(count), file.counts.size(), file.steps,
          static_cast<unsigned long long>(raw_blocks));
    }
  }
  (void)total;
  return 0;
}

}  // namespace codec_bench
