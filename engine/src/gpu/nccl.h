// Internal to gpu/: NCCL for allreduces of CUDA tensors that are not compressed. The library is
// loaded at run time (dlopen of THREELC_NCCL_LIBRARY's, else libnccl.so.2), so that
// libthreelc.so loads where NCCL is absent; only nccl.h is needed at build time. Every wait is
// bounded: the communicator is non-blocking, polled until the engine's timeout, then aborted.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "element_type.h"
#include "threelc/transport/transport.h"

namespace threelc::engine::gpu {

class NcclComm {
 public:
  // Whether NCCL reduces `type` with `op` (else the caller stages through the host).
  static bool supports(ElementType type, ReduceOp op);
  // ncclGetVersion() of `library` (empty: libnccl.so.2; the first call's library stays
  // loaded); 0 when it cannot be used here, with why in `why_not`.
  static int version(const std::string& library, std::string& why_not);

  // A communicator of every rank of `context` on `device`, with `library` (empty:
  // libnccl.so.2; the first call's library stays loaded). Every rank calls it at the same point
  // of the same collective: rank 0 makes the unique id and sends it to every rank over the data
  // channels with `tag`. Throws EngineError naming what failed (the library missing, an init
  // error such as two ranks on one GPU, a timeout).
  static std::unique_ptr<NcclComm> create(transport::Context& context, int device,
                                          const std::string& library,
                                          std::chrono::milliseconds timeout, uint32_t tag);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // recv = allreduce(send) over `count` elements on `stream`, and waits until it is done.
  // kAverage is NCCL's average. Throws EngineError (THREELC_EPEER on a timeout: a peer may
  // have failed; the communicator is then aborted).
  void allreduce(const void* send, void* recv, size_t count, ElementType type, ReduceOp op,
                 cudaStream_t stream);
  // recv (recv_count elements) = this rank's part of the reduction of every rank's send
  // (size() * recv_count elements); in place when recv is send + rank * recv_count. Waits.
  void reduce_scatter(const void* send, void* recv, size_t recv_count, ElementType type,
                      ReduceOp op, cudaStream_t stream);
  // recv (size() * send_count elements) = every rank's send, in rank order; in place when send
  // is recv + rank * send_count. Waits.
  void allgather(const void* send, void* recv, size_t send_count, ElementType type,
                 cudaStream_t stream);

 private:
  struct Impl;
  explicit NcclComm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace threelc::engine::gpu
