// The codec's table of environment variables (one row) and the reading of it.
#include "threelc/compression/settings.h"

#include <span>

namespace threelc::compression {
namespace {

constexpr settings::Setting kSettings[] = {
    {"THREELC_CODEC_ISA", settings::Type::kChoice, "auto", "auto, scalar, avx2 or avx512",
     "the codec's kernel set; auto: the best this CPU supports",
     "the codec's kernel set, read once per process: auto picks the best this CPU supports; a "
     "set this CPU cannot run falls back to the best it can. Every set produces the same bytes, "
     "so this only changes speed"},
};

}  // namespace

settings::SettingTable compression_settings() { return {"compression", kSettings}; }

Status codec_isa_from(const settings::EnvironmentLookup& lookup, Isa* isa) {
  const settings::Setting& row = kSettings[0];
  const std::string value = settings::value_or_default(row, lookup);
  const auto index = settings::parse_choice(value, {"auto", "scalar", "avx2", "avx512"});
  if (!index) return Status::failure(settings::refusal(row, value));
  constexpr Isa kIsas[] = {Isa::kAuto, Isa::kScalar, Isa::kAvx2, Isa::kAvx512};
  *isa = kIsas[*index];
  return Status::success();
}

const Status& codec_settings_status() {
  static const Status status = [] {
    Isa isa = Isa::kAuto;
    return codec_isa_from(settings::process_environment, &isa);
  }();
  return status;
}

}  // namespace threelc::compression
