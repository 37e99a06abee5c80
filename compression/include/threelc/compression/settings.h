// The codec's environment variable, THREELC_CODEC_ISA, declared once in src/settings.cc.
#pragma once

#include "threelc/compression/codec.h"
#include "threelc/compression/status.h"
#include "threelc/settings/setting.h"

namespace threelc::compression {

// The codec's rows, for the docs and the C ABI's threelc_setting_at().
settings::SettingTable compression_settings();

// THREELC_CODEC_ISA through `lookup`: the kernel set it names (Isa::kAuto when unset), or a
// failure naming the variable, the value and the accepted names. A named set this CPU cannot run
// is not an error: dispatch falls back to the best one it can.
Status codec_isa_from(const settings::EnvironmentLookup& lookup, Isa* isa);

// codec_isa_from() over the process environment, read once; the codec's C ABI refuses every
// encode and decode with its failure.
const Status& codec_settings_status();

}  // namespace threelc::compression
