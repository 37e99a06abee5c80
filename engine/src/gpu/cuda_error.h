// Internal to gpu/: CUDA failures become EngineError (THREELC_EINTERNAL) naming the call;
// the engine stops with that message, as with any failure inside a collective.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "engine_error.h"
#include "threelc/threelc.h"

namespace threelc::engine::gpu {

inline void check_cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky launch error
  throw EngineError(THREELC_EINTERNAL, std::string("CUDA: ") + what + ": " +
                                           cudaGetErrorName(error) + " (" +
                                           cudaGetErrorString(error) + ")");
}

}  // namespace threelc::engine::gpu
