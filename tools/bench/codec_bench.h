// The options of threelc-bench codec and what its two modes share: throughput (codec_bench.cc)
// and ratio on recorded gradients (codec_ratio.cc).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "threelc/compression/codec.h"

namespace codec_bench {

struct Options {
  std::vector<double> sizes_mib = {1, 16, 256};
  int reps = 0;  // 0: by size
  std::string isa = "auto";
  float sparsity = 1.0f;  // run_codec_bench starts from the engine's settings
  size_t scale_tile = 0;
  bool json = false;
  std::string gradients;
  std::vector<float> sparsities = {1.0f, 1.25f, 1.5f, 1.75f, 1.9f};
};

// The ISA of `name` (auto, scalar, avx2, avx512); false for another name.
bool parse_isa(std::string_view name, threelc::compression::Isa* isa);

// Ratio mode (--gradients): the compression ratio of recorded gradients per sparsity.
int run_ratio(const Options& opt);

}  // namespace codec_bench
