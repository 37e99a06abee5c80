/* Every error code of threelc's C ABI, in one enum: the codec's functions (threelc/codec.h)
 * return the first two, the engine's (threelc/threelc.h) any of them. Stable: codes are only
 * added. It lives with the codec because the codec is the lowest layer that returns codes; the
 * C++ layers' errors map onto it (docs/ARCHITECTURE.md, "Errors"). */
#ifndef THREELC_ERROR_CODES_H_
#define THREELC_ERROR_CODES_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum threelc_error_code {
  THREELC_OK = 0,
  THREELC_EINVAL = -1,     /* a bad argument (dtype, sparsity, null pointer, small buffer) or
                              setting */
  THREELC_EMALFORMED = -2, /* a block (or feedback blob) that does not follow the format */
  THREELC_ENOTINIT = -3,   /* threelc_init() has not been called (or shutdown was) */
  THREELC_ESHUTDOWN = -4,  /* the engine was shut down while the operation was pending */
  THREELC_EMISMATCH = -5,  /* ranks submitted the tensor differently (dtype, shape, op, ...) */
  THREELC_EDUPLICATE = -6, /* a tensor of that name is already in flight on this rank */
  THREELC_EPEER = -7,      /* a peer failed, closed or timed out; the engine has stopped */
  THREELC_ETIMEOUT = -8,   /* threelc_wait gave up (the operation is still pending) */
  THREELC_EJOINED = -9,    /* the operation cannot run while some rank has joined */
  THREELC_EINTERNAL = -10  /* anything else; the message says what */
} threelc_error_code;

#ifdef __cplusplus
}
#endif

#endif /* THREELC_ERROR_CODES_H_ */
