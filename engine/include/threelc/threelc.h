/* threelc public C ABI. The engine's operations arrive with the engine issue; today the
 * library exports its version and the codec (threelc/codec.h). */
#ifndef THREELC_THREELC_H_
#define THREELC_THREELC_H_

#include "threelc/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "major.minor.patch" of this library. */
const char* threelc_version(void);

#ifdef __cplusplus
}
#endif

#endif /* THREELC_THREELC_H_ */
