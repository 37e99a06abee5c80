// LauncherService over PMIx (Open MPI's mpirun, `srun --mpi=pmix`): libpmix.so.2 loaded at
// run time, initialized for one start and finalized after it.
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "dynamic_library.h"
#include "launcher_service.h"
#include "pmix_abi.h"

namespace threelc::transport::detail {

namespace {

// The library and its functions, loaded once per process.
struct PmixLibrary {
  DynamicLibrary library;
  pmix::InitFn init;
  pmix::FinalizeFn finalize;
  pmix::PutFn put;
  pmix::CommitFn commit;
  pmix::FenceFn fence;
  pmix::GetFn get;
  pmix::ErrorStringFn error_string;

  explicit PmixLibrary(DynamicLibrary lib)
      : library(std::move(lib)),
        init(library.function<pmix::InitFn>("PMIx_Init")),
        finalize(library.function<pmix::FinalizeFn>("PMIx_Finalize")),
        put(library.function<pmix::PutFn>("PMIx_Put")),
        commit(library.function<pmix::CommitFn>("PMIx_Commit")),
        fence(library.function<pmix::FenceFn>("PMIx_Fence")),
        get(library.function<pmix::GetFn>("PMIx_Get")),
        error_string(library.function<pmix::ErrorStringFn>("PMIx_Error_string")) {}

  std::string describe(pmix::Status status) const {
    const char* text = error_string(status);
    return (text != nullptr ? std::string(text) : "PMIx error") + " (" + std::to_string(status) +
           ")";
  }
};

const PmixLibrary& pmix_library() {
  static const PmixLibrary loaded(DynamicLibrary::open(
      {"libpmix.so.2", "libpmix.so"},
      "the job runs under PMIx (PMIX_NAMESPACE is set): install PMIx's library (Debian: "
      "libpmix2) or add its directory to LD_LIBRARY_PATH, or give every rank "
      "THREELC_COORDINATOR and THREELC_SECRET"));
  return loaded;
}

class PmixService final : public LauncherService {
 public:
  PmixService(const Options& options, ServiceClock::time_point deadline)
      : lib_(pmix_library()), prefix_(service_prefix(options)) {
    auto me = std::make_shared<pmix::Proc>();
    const ServiceReply reply = call_before(deadline, prefix_ + "PMIx_Init", [lib = &lib_, me] {
      return ServiceReply{lib->init(me.get(), nullptr, 0), {}};
    });
    check(reply.status, "PMIx_Init");
    closed_ = false;
    self_ = *me;
    self_.nspace[pmix::kMaxNamespace] = '\0';
    if (self_.rank != static_cast<pmix::Rank>(options.rank)) {
      lib_.finalize(nullptr, 0);
      throw Error(-1, prefix_ + "the launcher's PMIx says this process is rank " +
                          std::to_string(self_.rank) + " of namespace " + self_.nspace +
                          ", not rank " + std::to_string(options.rank));
    }
  }

  ~PmixService() override { close(); }

  const char* name() const override { return "PMIx"; }

  void put(const std::string& key, const std::string& value) override {
    std::string copy = value;
    pmix::Value item{};
    item.type = pmix::kString;
    item.data.string = copy.data();
    check(lib_.put(pmix::kGlobal, key.c_str(), &item), "PMIx_Put(" + key + ")");
    check(lib_.commit(), "PMIx_Commit");
  }

  void fence(ServiceClock::time_point deadline) override {
    const ServiceReply reply = bounded(deadline, "the launcher's PMIx fence", [lib = &lib_] {
      auto collect = std::make_unique<pmix::Info>();
      std::strncpy(collect->key, pmix::kCollectData, pmix::kMaxKey);
      collect->value.type = pmix::kBool;
      collect->value.data.flag = true;
      return ServiceReply{lib->fence(nullptr, 0, collect.get(), 1), {}};
    });
    check(reply.status, "the PMIx fence");
  }

  std::string get_from_rank0(const std::string& key, ServiceClock::time_point deadline) override {
    pmix::Proc rank0 = self_;
    rank0.rank = 0;
    const ServiceReply reply =
        bounded(deadline, "PMIx_Get(" + key + ")", [lib = &lib_, rank0, key] {
          pmix::Value* value = nullptr;
          ServiceReply got{lib->get(&rank0, key.c_str(), nullptr, 0, &value), {}};
          if (value != nullptr) {
            if (value->type == pmix::kString && value->data.string != nullptr) {
              got.text = value->data.string;
              std::free(value->data.string);  // PMIx allocates both with malloc
            } else if (got.status == pmix::kSuccess) {
              got.status = -1;
            }
            std::free(value);
          }
          return got;
        });
    if (reply.status == -1) {
      throw Error(0, prefix_ + "rank 0 published " + key + " in PMIx as something other than text");
    }
    check(reply.status, "PMIx_Get(" + key + ") of rank 0");
    return reply.text;
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    lib_.finalize(nullptr, 0);
  }

 private:
  // call_before(), and on a timeout no finalize: the call still runs inside PMIx.
  ServiceReply bounded(ServiceClock::time_point deadline, const std::string& what,
                       std::function<ServiceReply()> call) {
    try {
      return call_before(deadline, prefix_ + what, std::move(call));
    } catch (const Error& e) {
      if (e.timed_out()) closed_ = true;
      throw;
    }
  }

  void check(pmix::Status status, const std::string& what) const {
    if (status == pmix::kSuccess || status == pmix::kOperationSucceeded) return;
    throw Error(-1, prefix_ + what + " failed: " + lib_.describe(status));
  }

  const PmixLibrary& lib_;
  const std::string prefix_;
  pmix::Proc self_{};
  bool closed_ = true;  // until PMIx_Init succeeded
};

}  // namespace

std::unique_ptr<LauncherService> open_pmix_service(const Options& options,
                                                   ServiceClock::time_point deadline) {
  return std::make_unique<PmixService>(options, deadline);
}

}  // namespace threelc::transport::detail
