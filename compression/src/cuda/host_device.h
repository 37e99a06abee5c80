// Internal: THREELC_HOST_DEVICE marks the plain C++ functions that nvcc compiles for the device
// too, so that host tests can check the very code the kernels run.
#pragma once

#if defined(__CUDACC__)
#define THREELC_HOST_DEVICE __host__ __device__
#else
#define THREELC_HOST_DEVICE
#endif
