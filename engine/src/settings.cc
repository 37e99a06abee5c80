// engine_settings_from(): the engine's rows (settings_rows.cc) read through a lookup, and the
// list of every layer's rows for the docs and the C ABI. Nothing else in engine/ calls getenv()
// for a THREELC_* variable.
#include "settings.h"

#include <stdexcept>

#include "threelc/compression/codec.h"
#include "threelc/compression/settings.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kPushPull:
      return "push_pull";
    case AllreduceAlgorithm::kRing:
      return "ring";
  }
  return "?";
}

// The rows' defaults. They parse (a test reads the rows with nothing set), so nothing is refused.
EngineSettings::EngineSettings() {
  (void)settings::read_rows(engine_rows(), settings::no_variables, *this);
}

std::vector<settings::SettingTable> all_setting_tables() {
  return {{"engine", engine_setting_rows()},
          transport::transport_settings(),
          compression::compression_settings()};
}

EngineSettings engine_settings_from(const EnvironmentLookup& lookup) {
  EngineSettings result;
  if (auto refused = settings::read_rows(engine_rows(), lookup, result)) {
    throw std::invalid_argument("threelc: " + *refused);
  }
  // The codec reads its own variable when it first runs; refuse a malformed one here already.
  compression::Isa isa = compression::Isa::kAuto;
  if (const auto status = compression::codec_isa_from(lookup, &isa); !status.ok()) {
    throw std::invalid_argument("threelc: " + status.message());
  }
  return result;
}

EngineSettings engine_settings_from_environment() {
  return engine_settings_from(settings::process_environment);
}

}  // namespace threelc::engine
