// NcclComm in a build with CUDA but without nccl.h: uncompressed CUDA allreduces are staged
// through host memory and hierarchical ones run flat (supports() is false), so nothing but
// supports() is ever reached.
#include "engine_error.h"
#include "gpu/nccl.h"
#include "threelc/threelc.h"

namespace threelc::engine::gpu {

struct NcclComm::Impl {};

NcclComm::NcclComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclComm::~NcclComm() = default;

bool NcclComm::supports(ElementType /*type*/, ReduceOp /*op*/) { return false; }

int NcclComm::version(const std::string& /*library*/, std::string& why_not) {
  why_not = "NCCL: this build found no nccl.h";
  return 0;
}

std::unique_ptr<NcclComm> NcclComm::create(transport::Context& /*context*/, int /*device*/,
                                           const std::string& /*library*/,
                                           std::chrono::milliseconds /*timeout*/,
                                           uint32_t /*tag*/) {
  throw EngineError(THREELC_EINTERNAL, "NCCL: this build found no nccl.h");
}

void NcclComm::allreduce(const void*, void*, size_t, ElementType, ReduceOp, cudaStream_t) {
  throw EngineError(THREELC_EINTERNAL, "NCCL: this build found no nccl.h");
}

void NcclComm::reduce_scatter(const void*, void*, size_t, ElementType, ReduceOp, cudaStream_t) {
  throw EngineError(THREELC_EINTERNAL, "NCCL: this build found no nccl.h");
}

void NcclComm::allgather(const void*, void*, size_t, ElementType, cudaStream_t) {
  throw EngineError(THREELC_EINTERNAL, "NCCL: this build found no nccl.h");
}

}  // namespace threelc::engine::gpu
