// Chooses the kernel set by CPU detection at run time (THREELC_CODEC_ISA may force one).
#include <string_view>

#include "kernels.h"
#include "threelc/compression/settings.h"

namespace threelc::compression {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("bmi2");
  }
  return false;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

namespace {

// A malformed THREELC_CODEC_ISA leaves the choice to detection here; the codec's C ABI and
// threelc_init() refuse it (codec_settings_status()).
Isa detect() {
  Isa forced = Isa::kAuto;
  if (codec_isa_from(settings::process_environment, &forced).ok() && forced != Isa::kAuto &&
      isa_supported(forced)) {
    return forced;
  }
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

namespace detail {

const Kernels& kernels_for(Isa isa) {
  if (isa == Isa::kAuto) isa = detected_isa();
  if (!isa_supported(isa)) return scalar_kernels();
  switch (isa) {
    case Isa::kAvx2:
      return avx2_kernels();
    case Isa::kAvx512:
      return avx512_kernels();
    default:
      return scalar_kernels();
  }
}

}  // namespace detail
}  // namespace threelc::compression
