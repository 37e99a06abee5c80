#include "threelc/threelc.h"

extern "C" const char* threelc_version(void) { return THREELC_VERSION; }

// The codec's C ABI (threelc/codec.h) is exported from this library too. Nothing here calls
// it, so this reference makes the linker take its object file from the static codec library.
[[gnu::used]] static const void* const kCodecAbi =
    reinterpret_cast<const void*>(&threelc_codec_isa);
