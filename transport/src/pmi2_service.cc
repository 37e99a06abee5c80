// LauncherService over Slurm's PMI-2 (`srun --mpi=pmi2`): libpmi2.so.0 loaded at run time and
// initialized once per process. It is never finalized: PMI2_Finalize closes the socket srun
// gave the process, after which PMI-2 cannot be initialized again, and a later start needs it.
#include <array>
#include <mutex>

#include "dynamic_library.h"
#include "launcher_service.h"

namespace threelc::transport::detail {

namespace {

constexpr int kSuccess = 0;      // PMI2_SUCCESS
constexpr int kMaxValue = 1024;  // PMI2_MAX_VALLEN
constexpr int kMaxJobId = 256;

using InitFn = int (*)(int* spawned, int* size, int* rank, int* appnum);
using JobIdFn = int (*)(char* jobid, int jobid_size);
using PutFn = int (*)(const char* key, const char* value);
using FenceFn = int (*)();
using GetFn = int (*)(const char* jobid, int src_pmi_id, const char* key, char* value, int maxvalue,
                      int* vallen);

// The library, its functions and the process's one initialization.
struct Pmi2Library {
  DynamicLibrary library;
  PutFn put;
  FenceFn fence;
  GetFn get;
  InitFn init;
  JobIdFn job_id;
  std::mutex mutex;
  bool initialized = false;
  int rank = -1;
  int size = 0;
  std::string jobid;  // passed to PMI2_KVS_Get (never NULL: the client library needs one)

  explicit Pmi2Library(DynamicLibrary lib)
      : library(std::move(lib)),
        put(library.function<PutFn>("PMI2_KVS_Put")),
        fence(library.function<FenceFn>("PMI2_KVS_Fence")),
        get(library.function<GetFn>("PMI2_KVS_Get")),
        init(library.function<InitFn>("PMI2_Init")),
        job_id(library.function<JobIdFn>("PMI2_Job_GetId")) {}
};

Pmi2Library& pmi2_library() {
  static Pmi2Library loaded(DynamicLibrary::open(
      {"libpmi2.so.0", "libpmi2.so"},
      "the job runs under Slurm's PMI-2 (PMI_FD is set): install Slurm's PMI-2 library "
      "(Debian: libpmi2-0) or add its directory to LD_LIBRARY_PATH, or start with 'srun "
      "--mpi=pmix', or give every rank THREELC_COORDINATOR and THREELC_SECRET"));
  return loaded;
}

std::string status_text(int status) { return "PMI-2 error " + std::to_string(status); }

class Pmi2Service final : public LauncherService {
 public:
  Pmi2Service(const Options& options, ServiceClock::time_point deadline)
      : lib_(pmi2_library()), prefix_(service_prefix(options)) {
    const std::lock_guard lock(lib_.mutex);
    if (!lib_.initialized) {
      const ServiceReply reply = call_before(deadline, prefix_ + "PMI2_Init", [lib = &lib_] {
        int spawned = 0;
        int appnum = 0;
        ServiceReply init{lib->init(&spawned, &lib->size, &lib->rank, &appnum), {}};
        if (init.status != kSuccess) return init;
        std::array<char, kMaxJobId> jobid{};
        init.status = lib->job_id(jobid.data(), kMaxJobId - 1);
        lib->jobid = jobid.data();
        return init;
      });
      if (reply.status != kSuccess) {
        throw Error(-1,
                    prefix_ + "PMI2_Init or PMI2_Job_GetId failed: " + status_text(reply.status));
      }
      lib_.initialized = true;
    }
    if (lib_.rank != options.rank || lib_.size != options.size) {
      throw Error(-1, prefix_ + "Slurm's PMI-2 says this process is rank " +
                          std::to_string(lib_.rank) + " of " + std::to_string(lib_.size) +
                          ", not rank " + std::to_string(options.rank) + " of " +
                          std::to_string(options.size));
    }
  }

  const char* name() const override { return "PMI-2"; }

  void put(const std::string& key, const std::string& value) override {
    const int status = lib_.put(key.c_str(), value.c_str());
    if (status != kSuccess) {
      throw Error(-1, prefix_ + "PMI2_KVS_Put(" + key + ") failed: " + status_text(status));
    }
  }

  void fence(ServiceClock::time_point deadline) override {
    const ServiceReply reply =
        call_before(deadline, prefix_ + "the launcher's PMI-2 fence", [lib = &lib_] {
          return ServiceReply{lib->fence(), {}};
        });
    if (reply.status != kSuccess) {
      throw Error(-1, prefix_ + "PMI2_KVS_Fence failed: " + status_text(reply.status));
    }
  }

  std::string get_from_rank0(const std::string& key, ServiceClock::time_point deadline) override {
    const ServiceReply reply =
        call_before(deadline, prefix_ + "PMI2_KVS_Get(" + key + ")", [lib = &lib_, key] {
          std::array<char, kMaxValue + 1> value{};
          int length = 0;
          ServiceReply got{
              lib->get(lib->jobid.c_str(), 0, key.c_str(), value.data(), kMaxValue, &length), {}};
          got.text = value.data();
          return got;
        });
    if (reply.status != kSuccess) {
      throw Error(
          0, prefix_ + "PMI2_KVS_Get(" + key + ") of rank 0 failed: " + status_text(reply.status));
    }
    return reply.text;
  }

  void close() override {}

 private:
  Pmi2Library& lib_;
  const std::string prefix_;
};

}  // namespace

std::unique_ptr<LauncherService> open_pmi2_service(const Options& options,
                                                   ServiceClock::time_point deadline) {
  return std::make_unique<Pmi2Service>(options, deadline);
}

}  // namespace threelc::transport::detail
