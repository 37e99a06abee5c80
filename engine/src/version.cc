#include "threelc/threelc.h"

extern "C" const char* threelc_version(void) { return THREELC_VERSION; }
