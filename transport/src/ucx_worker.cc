// UcxWorker: ucp context and worker setup, the progress thread's loop, and teardown.
#include "ucx_worker.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <memory>

#include "settings.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

std::string ucx_status_text(ucs_status_t status) {
  return std::string(ucs_status_string(status)) + " (UCX status " +
         std::to_string(static_cast<int>(status)) + ")";
}

namespace {

// True unless the user set the shared-memory transports' error handling, or UCX_TLS leaves
// them out (UCX would then warn about a setting that no transport uses).
bool shared_memory_needs_error_handling() {
  for (const char* name :
       {"UCX_MM_ERROR_HANDLING", "UCX_POSIX_ERROR_HANDLING", "UCX_SYSV_ERROR_HANDLING"}) {
    if (!ucx_variable(name).empty()) return false;
  }
  const std::string tls = ucx_variable("UCX_TLS");
  if (tls.empty() || tls[0] == '^') return true;  // all, or all but some
  for (const char* shm : {"all", "sm", "shm", "mm", "posix", "sysv"}) {
    size_t at = 0;
    // As a whole item of the comma-separated list.
    while ((at = tls.find(shm, at)) != std::string::npos) {
      const size_t end = at + std::char_traits<char>::length(shm);
      if ((at == 0 || tls[at - 1] == ',') && (end == tls.size() || tls[end] == ',')) return true;
      at = end;
    }
  }
  return false;
}

// UCX_NET_DEVICES for THREELC_IFACE=`interface`: the interface (UCX's tcp transport names
// devices by interface) and every RDMA port, "mlx5_0:1", from /sys/class/infiniband.
std::string net_devices_for(const std::string& interface) {
  std::vector<std::string> rdma_ports;
  std::error_code ec;
  for (const auto& device : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::error_code port_ec;
    for (const auto& port : std::filesystem::directory_iterator(device.path() / "ports", port_ec)) {
      rdma_ports.push_back(device.path().filename().string() + ":" +
                           port.path().filename().string());
    }
  }
  std::sort(rdma_ports.begin(), rdma_ports.end());
  std::string devices = interface;
  for (const auto& port : rdma_ports) devices += "," + port;
  return devices;
}

}  // namespace

std::string UcxWorker::fail_text(const char* what, ucs_status_t status) const {
  return prefix_ + "UCX: " + what + " failed: " + ucx_status_text(status);
}

UcxWorker::UcxWorker(const UcxWorkerOptions& options) : prefix_(options.prefix) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) throw Error(-1, fail_text("reading the UCX_* configuration", status));
  // Two defaults of UCX's that this transport changes, each only when the user has not set it.
  const auto set = [&](const char* name, const char* value) {
    const ucs_status_t modified = ucp_config_modify(config, name, value);
    if (modified != UCS_OK) {
      ucp_config_release(config);
      throw Error(-1, fail_text((std::string("setting ") + name).c_str(), modified));
    }
  };
  // UCX's keepalive finds a dead peer on transports that do not report one (shared memory).
  // Its default round (20 s) would leave that to THREELC_TIMEOUT; a 1 s round costs a few
  // cheap checks a second.
  if (ucx_variable("UCX_KEEPALIVE_INTERVAL").empty()) set("KEEPALIVE_INTERVAL", "1s");
  // Every endpoint asks for peer-failure handling (UCP_ERR_HANDLING_MODE_PEER), which UCX's
  // shared-memory transports (posix, sysv) decline unless told otherwise: ranks on one host
  // would then talk over TCP loopback. Let them take part unless the user chose otherwise.
  if (shared_memory_needs_error_handling()) set("MM_ERROR_HANDLING", "y");
  // THREELC_IFACE picks the interface of UCX's network traffic as it does TCP's.
  if (!options.interface.empty() && ucx_variable("UCX_NET_DEVICES").empty()) {
    set("NET_DEVICES", net_devices_for(options.interface).c_str());
  }
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.estimated_num_eps = static_cast<size_t>(options.expected_peers);
  params.name = "threelc";
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK) throw Error(-1, fail_text("ucp_init", status));

  // Single-threaded worker: only the progress thread calls into it (see ucx_worker.h).
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) {
    ucp_cleanup(context_);
    throw Error(-1, fail_text("ucp_worker_create", status));
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  status = ucp_worker_get_address(worker_, &address, &length);
  if (status == UCS_OK) {
    const auto* bytes = reinterpret_cast<const std::byte*>(address);
    address_.assign(bytes, bytes + length);
    ucp_worker_release_address(worker_, address);
    status = ucp_worker_get_efd(worker_, &efd_);
  }
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw Error(-1, fail_text("ucp_worker_get_address / ucp_worker_get_efd", status));
  }
  thread_ = std::thread([this] { loop(); });
}

UcxWorker::~UcxWorker() {
  stop();
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

void UcxWorker::post(std::function<void()> task) {
  // Signaled under the lock: once stop() has set stopping_, no post touches the worker.
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  tasks_.push_back(std::move(task));
  ucp_worker_signal(worker_);
}

bool UcxWorker::run(const std::function<void()>& task, std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  post([task, done] {
    task();
    done->set_value();
  });
  return future.wait_for(limit) == std::future_status::ready;
}

void UcxWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ucp_worker_signal(worker_);
  if (thread_.joinable()) thread_.join();
}

bool UcxWorker::run_tasks() {
  std::deque<std::function<void()>> tasks;
  {
    std::lock_guard lock(mutex_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
  return !tasks.empty();
}

void UcxWorker::loop() {
  auto last_progress = std::chrono::steady_clock::now();
  for (;;) {
    const bool worked = run_tasks();
    if (ucp_worker_progress(worker_) != 0 || worked) {
      if (sends_in_flight_ > 0) last_progress = std::chrono::steady_clock::now();
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      if (stopping_ && tasks_.empty()) return;
    }
    if (sends_in_flight_ > 0 && std::chrono::steady_clock::now() - last_progress < kSendSpin) {
      sched_yield();  // see ucx_worker.h: a full FIFO sends no event when it drains
      continue;
    }
    const ucs_status_t status = ucp_worker_arm(worker_);
    if (status == UCS_ERR_BUSY) continue;  // events arrived meanwhile: progress them
    {
      // A post after the check above signals the (now armed) worker; one before it is seen
      // here. Either way poll() does not sleep through it.
      std::lock_guard lock(mutex_);
      if (!tasks_.empty() || stopping_) continue;
    }
    pollfd fd{efd_, POLLIN, 0};
    const auto wake = sends_in_flight_ > 0 ? kSendWake : kIdleWake;
    (void)::poll(&fd, 1, static_cast<int>(wake.count()));
  }
}

}  // namespace threelc::transport::detail
