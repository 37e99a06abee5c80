// Internal to gpu/: makes a CUDA device current for the calling thread for one scope, and puts
// the thread's own device back afterwards (framework threads keep theirs).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "gpu/cuda_error.h"

namespace threelc::engine::gpu {

class CurrentDevice {
 public:
  // Throws EngineError with CUDA's message.
  explicit CurrentDevice(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
  }
  ~CurrentDevice() { cudaSetDevice(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace threelc::engine::gpu
