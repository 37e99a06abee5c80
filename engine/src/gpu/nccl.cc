#include "gpu/nccl.h"

#include <dlfcn.h>
#include <nccl.h>

#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda_error.h"

namespace threelc::engine::gpu {

namespace {

// The entry points used, resolved once from the library.
struct NcclLibrary {
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*init_rank_config)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*get_async_error)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                 ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*abort)(ncclComm_t) = nullptr;
  ncclResult_t (*destroy)(ncclComm_t) = nullptr;
  const char* (*error_string)(ncclResult_t) = nullptr;
  ncclResult_t (*get_version)(int*) = nullptr;
  std::string why_not;  // non-empty: not loaded
};

template <typename F>
void resolve(void* handle, const char* name, F* into, std::string& why_not) {
  *into = reinterpret_cast<F>(dlsym(handle, name));
  if (*into == nullptr && why_not.empty()) why_not = std::string("no symbol ") + name;
}

// Loaded by the first call (its `path`; empty: libnccl.so.2), kept for the process.
const NcclLibrary& library(const std::string& path = {}) {
  static const NcclLibrary loaded = [&path] {
    NcclLibrary lib;
    const std::string name = !path.empty() ? path : "libnccl.so.2";
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      lib.why_not = "cannot load NCCL (" + name + "): " + (error ? error : "dlopen failed") +
                    "; set THREELC_NCCL_LIBRARY to libnccl.so.2's path, or THREELC_NCCL=0";
      return lib;
    }
    resolve(handle, "ncclGetUniqueId", &lib.get_unique_id, lib.why_not);
    resolve(handle, "ncclCommInitRankConfig", &lib.init_rank_config, lib.why_not);
    resolve(handle, "ncclCommGetAsyncError", &lib.get_async_error, lib.why_not);
    resolve(handle, "ncclAllReduce", &lib.all_reduce, lib.why_not);
    resolve(handle, "ncclReduceScatter", &lib.reduce_scatter, lib.why_not);
    resolve(handle, "ncclAllGather", &lib.all_gather, lib.why_not);
    resolve(handle, "ncclCommAbort", &lib.abort, lib.why_not);
    resolve(handle, "ncclCommDestroy", &lib.destroy, lib.why_not);
    resolve(handle, "ncclGetErrorString", &lib.error_string, lib.why_not);
    resolve(handle, "ncclGetVersion", &lib.get_version, lib.why_not);
    if (!lib.why_not.empty())
      lib.why_not = name + " is not a usable NCCL (2.14 or later): " + lib.why_not;
    return lib;
  }();
  return loaded;
}

const NcclLibrary& loaded_library(const std::string& path) {
  const NcclLibrary& lib = library(path);
  if (!lib.why_not.empty()) throw EngineError(THREELC_EINTERNAL, "NCCL: " + lib.why_not);
  return lib;
}

void check_nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  throw EngineError(THREELC_EINTERNAL,
                    std::string("NCCL: ") + what + ": " + library().error_string(result));
}

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::kUint8:
      return ncclUint8;
    case ElementType::kInt8:
      return ncclInt8;
    case ElementType::kInt32:
      return ncclInt32;
    case ElementType::kInt64:
      return ncclInt64;
    case ElementType::kFloat16:
      return ncclFloat16;
    case ElementType::kBFloat16:
      return ncclBfloat16;
    case ElementType::kFloat32:
      return ncclFloat32;
    case ElementType::kFloat64:
      return ncclFloat64;
    case ElementType::kInt16:  // none in NCCL: supports() stages int16 through the host
    case ElementType::kBool:   // never reduced: submissions refuse it
      break;
  }
  throw EngineError(THREELC_EINTERNAL,
                    std::string("NCCL has no type for ") + element_type_name(type));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
  }
  return ncclSum;
}

}  // namespace

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  std::chrono::milliseconds timeout{};  // create()'s: THREELC_TIMEOUT

  // Polls the non-blocking communicator until `done` says so or it fails; aborts on timeout.
  template <typename Done>
  void wait(const char* what, Done done) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check_nccl(library().get_async_error(comm, &state), what);
      check_nccl(state, what);
      if (state == ncclSuccess && done()) return;
      if (std::chrono::steady_clock::now() > deadline) {
        library().abort(comm);
        comm = nullptr;
        throw EngineError(THREELC_EPEER,
                          std::string("NCCL: ") + what + " did not finish within " +
                              std::to_string(std::chrono::duration<double>(timeout).count()) +
                              " s (THREELC_TIMEOUT): a peer may have failed or stalled");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Waits until the collective just queued on `stream` is done.
  void finish(const char* what, cudaStream_t stream) {
    wait(what, [stream, what] {
      const cudaError_t state = cudaStreamQuery(stream);
      if (state == cudaErrorNotReady) return false;
      check_cuda(state, what);
      return true;
    });
  }
};

NcclComm::NcclComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NcclComm::~NcclComm() {
  if (impl_ && impl_->comm != nullptr) library().destroy(impl_->comm);
}

bool NcclComm::supports(ElementType type, ReduceOp op) {
  // Every ElementType but int16 (and bool, never reduced) has an NCCL type; integer averages
  // keep the engine's own truncating division (reduce_ops.h). Both are staged through host
  // memory.
  if (type == ElementType::kInt16 || type == ElementType::kBool) return false;
  return op != ReduceOp::kAverage || is_floating(type);
}

int NcclComm::version(const std::string& path, std::string& why_not) {
  const NcclLibrary& lib = library(path);
  int code = 0;
  if (lib.why_not.empty() && lib.get_version(&code) == ncclSuccess) return code;
  why_not = "NCCL: " + (lib.why_not.empty() ? std::string("ncclGetVersion failed") : lib.why_not);
  return 0;
}

std::unique_ptr<NcclComm> NcclComm::create(transport::Context& context, int device,
                                           const std::string& library_path,
                                           std::chrono::milliseconds timeout, uint32_t tag) {
  const NcclLibrary& lib = loaded_library(library_path);
  ncclUniqueId id{};
  auto id_bytes = std::as_writable_bytes(std::span<ncclUniqueId>(&id, 1));
  if (context.rank() == 0) {
    check_nccl(lib.get_unique_id(&id), "ncclGetUniqueId");
    std::vector<transport::Request> sends;
    for (int peer = 1; peer < context.size(); ++peer) {
      sends.push_back(context.pair(peer).send(tag, id_bytes));
    }
    for (auto& send : sends) send.wait();
  } else {
    context.pair(0).recv(tag, id_bytes).wait();
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  auto impl = std::make_unique<Impl>();
  impl->timeout = timeout;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  check_nccl(lib.init_rank_config(&impl->comm, context.size(), id, context.rank(), &config),
             "ncclCommInitRankConfig");
  impl->wait("communicator set-up", [] { return true; });
  return std::unique_ptr<NcclComm>(new NcclComm(std::move(impl)));
}

void NcclComm::allreduce(const void* send, void* recv, size_t count, ElementType type, ReduceOp op,
                         cudaStream_t stream) {
  check_nccl(
      library().all_reduce(send, recv, count, nccl_type(type), nccl_op(op), impl_->comm, stream),
      "ncclAllReduce");
  impl_->finish("allreduce", stream);
}

void NcclComm::reduce_scatter(const void* send, void* recv, size_t recv_count, ElementType type,
                              ReduceOp op, cudaStream_t stream) {
  check_nccl(library().reduce_scatter(send, recv, recv_count, nccl_type(type), nccl_op(op),
                                      impl_->comm, stream),
             "ncclReduceScatter");
  impl_->finish("reduce-scatter", stream);
}

void NcclComm::allgather(const void* send, void* recv, size_t send_count, ElementType type,
                         cudaStream_t stream) {
  check_nccl(library().all_gather(send, recv, send_count, nccl_type(type), impl_->comm, stream),
             "ncclAllGather");
  impl_->finish("allgather", stream);
}

}  // namespace threelc::engine::gpu
