// The codec's table of environment variables (one row) and the reading of it.
#include "threelc/compression/settings.h"

#include <array>

#include "threelc/settings/row.h"

namespace threelc::compression {
namespace {

constexpr std::array kRows = {
    settings::Row<Isa>{
        {"THREELC_CODEC_ISA", settings::Type::kChoice, "auto", "auto, scalar, avx2 or avx512",
         "the codec's kernel set; auto: the best this CPU supports",
         "the codec's kernel set, read once per process: auto picks the best this CPU supports; "
         "a set this CPU cannot run falls back to the best it can. Every set produces the same "
         "bytes, so this only changes speed"},
        [](std::string_view v, Isa& isa) {
          return settings::assign(isa,
                                  settings::parse_choice_value<Isa>(v, {{"auto", Isa::kAuto},
                                                                        {"scalar", Isa::kScalar},
                                                                        {"avx2", Isa::kAvx2},
                                                                        {"avx512", Isa::kAvx512}}));
        }},
};

constexpr auto kDocRows = settings::documentation(kRows);

}  // namespace

settings::SettingTable compression_settings() { return {"compression", kDocRows}; }

Status codec_isa_from(const settings::EnvironmentLookup& lookup, Isa* isa) {
  if (auto refused = settings::read_rows<Isa>(kRows, lookup, *isa)) {
    return Status::failure(*refused);
  }
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
