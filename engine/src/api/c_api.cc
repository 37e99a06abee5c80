// The C ABI (threelc/threelc.h) over one Engine. The engine lives here and nowhere else; the
// handle table outlives engines so that handles can be waited on after shutdown.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/requests.h"
#include "engine_error.h"
#include "gpu/gpu.h"
#include "runtime/engine.h"
#include "settings.h"
#include "threelc/compression/cuda_codec.h"
#include "threelc/threelc.h"

namespace te = threelc::engine;

namespace {

// The engine and the table its background thread completes handles in. Members are destroyed
// in reverse order: when a process exits without threelc_shutdown (after an error, say), the
// engine's destructor joins the background thread before the table is destroyed.
struct Library {
  te::HandleTable handles;
  std::shared_mutex mutex;  // shared: submissions and queries; unique: init and shutdown
  std::unique_ptr<te::Engine> engine;
};
Library lib;

thread_local std::string last_error;

int fail(int code, const std::string& message) {
  last_error = message;
  return code;
}

// Every layer's settings as one list, for threelc_setting_at().
struct SettingEntry {
  const char* layer;
  const threelc::settings::Setting* row;
};
const std::vector<SettingEntry>& setting_entries() {
  static const std::vector<SettingEntry> entries = [] {
    std::vector<SettingEntry> all;
    for (const auto& table : te::all_setting_tables()) {
      for (const auto& row : table.rows) all.push_back({table.layer, &row});
    }
    return all;
  }();
  return entries;
}

const char* not_initialized = "threelc is not initialized: call threelc_init() first";

// Runs f() and returns what it returns, as R; an exception becomes its error code
// (THREELC_EINTERNAL for anything but an EngineError) and its message, after `context`,
// threelc_last_error()'s.
template <typename R, typename F>
R guarded(const char* context, F&& f) {
  try {
    return f();
  } catch (const te::EngineError& e) {
    return fail(e.code(), context + std::string(e.what()));
  } catch (const std::exception& e) {
    return fail(THREELC_EINTERNAL, context + std::string(e.what()));
  }
}

threelc_handle submit(te::OpKind kind, const threelc_tensor* tensor,
                      const threelc_options* options) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  return guarded<threelc_handle>("", [&] {
    return lib.engine->submit(te::make_operation(*lib.engine, kind, tensor, options));
  });
}

// Submits what make() builds from the engine (a process set's add or removal).
template <typename F>
threelc_handle submit_made(F make) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  return guarded<threelc_handle>("", [&] { return lib.engine->submit(make(*lib.engine)); });
}

// f(members of `id`, this rank) for a known set; THREELC_EINVAL naming an unknown one.
template <typename F>
int process_set_query(const char* what, int id, F f) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  const te::ProcessSetTable& sets = lib.engine->process_sets();
  const auto members = sets.members(id);
  if (!members) return fail(THREELC_EINVAL, std::string(what) + ": " + sets.unknown(id));
  return f(*members, lib.engine->identity().rank);
}

template <typename F>
int identity(F field) {
  std::shared_lock lock(lib.mutex);
  return lib.engine ? field(lib.engine->identity()) : -1;
}

}  // namespace

extern "C" {

void threelc_tensor_init(threelc_tensor* tensor) {
  if (tensor == nullptr) return;
  std::memset(tensor, 0, sizeof *tensor);
  tensor->dtype = THREELC_FLOAT32;
  tensor->device = THREELC_DEVICE_CPU;
}

void threelc_options_init(threelc_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof *options);
  options->op = THREELC_OP_SUM;
  options->prescale = 1.0;
  options->postscale = 1.0;
  options->compression = THREELC_COMPRESSION_DEFAULT;
  options->sparsity = 0.0f;
  options->root_rank = 0;
}

int threelc_init(void) {
  std::unique_lock lock(lib.mutex);
  if (lib.engine) return THREELC_OK;
  return guarded<int>("", [&] {
    lib.engine = std::make_unique<te::Engine>(lib.handles);
    return THREELC_OK;
  });
}

int threelc_shutdown(void) {
  std::unique_lock lock(lib.mutex);
  if (!lib.engine) return THREELC_OK;
  lib.engine->shutdown();
  lib.engine.reset();
  return THREELC_OK;
}

int threelc_is_initialized(void) {
  std::shared_lock lock(lib.mutex);
  return lib.engine ? 1 : 0;
}

int threelc_cuda_built(void) { return threelc::compression::cuda::built() ? 1 : 0; }

int threelc_cuda_available(void) {
  const std::string why = te::gpu::unavailable_reason();
  if (why.empty()) return 1;
  fail(0, why);
  return 0;
}

int threelc_nccl_version(void) {
  return guarded<int>("", [] {
    te::EngineSettings settings;
    try {
      settings = te::engine_settings_from_environment();
    } catch (const std::invalid_argument& e) {
      throw te::EngineError(THREELC_EINVAL, e.what());
    }
    std::string why;
    const int version = settings.nccl ? te::gpu::nccl_version(settings.nccl_library, why) : 0;
    if (version == 0) fail(0, settings.nccl ? why : "THREELC_NCCL=0 turns NCCL off");
    return version;
  });
}

int threelc_rank(void) {
  return identity([](const te::Identity& id) { return id.rank; });
}
int threelc_size(void) {
  return identity([](const te::Identity& id) { return id.size; });
}
int threelc_local_rank(void) {
  return identity([](const te::Identity& id) { return id.local_rank; });
}
int threelc_local_size(void) {
  return identity([](const te::Identity& id) { return id.local_size; });
}
int threelc_cross_rank(void) {
  return identity([](const te::Identity& id) { return id.cross_rank; });
}
int threelc_cross_size(void) {
  return identity([](const te::Identity& id) { return id.cross_size; });
}
int threelc_is_homogeneous(void) {
  return identity([](const te::Identity& id) { return te::same_ranks_per_host(id) ? 1 : 0; });
}

threelc_handle threelc_allreduce(const threelc_tensor* tensor, const threelc_options* options) {
  return submit(te::OpKind::kAllreduce, tensor, options);
}
threelc_handle threelc_push_pull(const threelc_tensor* tensor, const threelc_options* options) {
  return submit(te::OpKind::kAllreduce, tensor, options);
}
threelc_handle threelc_broadcast(const threelc_tensor* tensor, const threelc_options* options) {
  return submit(te::OpKind::kBroadcast, tensor, options);
}
threelc_handle threelc_allgather(const threelc_tensor* tensor, const threelc_options* options) {
  return submit(te::OpKind::kAllgather, tensor, options);
}
threelc_handle threelc_reducescatter(const threelc_tensor* tensor, const threelc_options* options) {
  return submit(te::OpKind::kReducescatter, tensor, options);
}
threelc_handle threelc_alltoall(const threelc_tensor* tensor, const threelc_options* options) {
  return submit(te::OpKind::kAlltoall, tensor, options);
}
threelc_handle threelc_barrier(void) { return submit(te::OpKind::kBarrier, nullptr, nullptr); }
threelc_handle threelc_barrier_set(int process_set) {
  threelc_options options;
  threelc_options_init(&options);
  options.process_set = process_set;
  return submit(te::OpKind::kBarrier, nullptr, &options);
}
threelc_handle threelc_join(void) { return submit(te::OpKind::kJoin, nullptr, nullptr); }

threelc_handle threelc_add_process_set(const int* ranks, int count) {
  return submit_made([&](te::Engine& e) { return te::make_add_process_set(e, ranks, count); });
}
threelc_handle threelc_remove_process_set(int id) {
  return submit_made([&](te::Engine& e) { return te::make_remove_process_set(e, id); });
}

int threelc_process_set_size(int id) {
  return process_set_query(
      "threelc_process_set_size", id,
      [](const std::vector<int32_t>& members, int) { return static_cast<int>(members.size()); });
}

int threelc_process_set_rank(int id) {
  return process_set_query(
      "threelc_process_set_rank", id, [&](const std::vector<int32_t>& members, int rank) {
        const int index = te::member_index(members, rank);
        if (index >= 0) return index;
        return fail(THREELC_EINVAL, "threelc_process_set_rank: rank " + std::to_string(rank) +
                                        " is not a member of process set " + std::to_string(id) +
                                        " (ranks " + te::members_text(members) + ")");
      });
}

int threelc_process_set_included(int id) {
  return process_set_query("threelc_process_set_included", id,
                           [](const std::vector<int32_t>& members, int rank) {
                             return te::member_index(members, rank) >= 0 ? 1 : 0;
                           });
}

int threelc_process_set_ranks(int id, int* out, int capacity) {
  return process_set_query("threelc_process_set_ranks", id,
                           [&](const std::vector<int32_t>& members, int) {
                             const int n = static_cast<int>(members.size());
                             if (out != nullptr && capacity >= n)
                               std::copy(members.begin(), members.end(), out);
                             return n;
                           });
}

int threelc_process_set_ids(int* out, int capacity) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  const std::vector<int32_t> ids = lib.engine->process_sets().ids();
  const int n = static_cast<int>(ids.size());
  if (out != nullptr && capacity >= n) std::copy(ids.begin(), ids.end(), out);
  return n;
}

int threelc_flush(void) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  lib.engine->flush();
  return THREELC_OK;
}

int threelc_poll(threelc_handle handle) {
  const int r = lib.handles.poll(handle);
  return r < 0 ? fail(r, "unknown handle " + std::to_string(handle)) : r;
}

int threelc_wait(threelc_handle handle, int64_t timeout_ms) {
  std::optional<std::chrono::milliseconds> timeout;
  if (timeout_ms >= 0) timeout = std::chrono::milliseconds(timeout_ms);
  const int r = lib.handles.wait(handle, timeout);
  if (r == THREELC_EINVAL) return fail(r, "unknown handle " + std::to_string(handle));
  if (r == THREELC_ETIMEOUT) {
    return fail(r, "operation " + std::to_string(handle) + " still pending after " +
                       std::to_string(timeout_ms) + " ms");
  }
  if (r != THREELC_OK) {
    const std::string* message = lib.handles.error(handle);
    last_error = message ? *message : "";
  }
  return r;
}

const char* threelc_handle_error(threelc_handle handle) {
  const std::string* message = lib.handles.error(handle);
  return message ? message->c_str() : "";
}

int threelc_handle_result(threelc_handle handle, threelc_result* result) {
  if (result == nullptr) return fail(THREELC_EINVAL, "result is NULL");
  const te::OpResult* r = lib.handles.result(handle);
  if (r == nullptr) {
    return fail(THREELC_EINVAL, "handle " + std::to_string(handle) + " is unknown or pending");
  }
  std::memset(result, 0, sizeof *result);
  result->data = r->data.data();
  result->bytes = r->data.size();
  result->dtype = static_cast<int>(r->dtype);
  result->ndim = static_cast<int>(r->shape.size());
  for (size_t i = 0; i < r->shape.size() && i < THREELC_MAX_DIMS; ++i) {
    result->shape[i] = r->shape[i];
  }
  result->received_splits = r->received_splits.data();
  result->nsplits = static_cast<int>(r->received_splits.size());
  result->last_joined_rank = r->last_joined_rank;
  result->process_set = r->process_set;
  return THREELC_OK;
}

int threelc_release(threelc_handle handle) {
  const int r = lib.handles.release(handle);
  return r < 0 ? fail(r, "unknown handle " + std::to_string(handle)) : r;
}

int threelc_get_statistics(threelc_statistics* statistics) {
  if (statistics == nullptr) return fail(THREELC_EINVAL, "statistics is NULL");
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  const te::TrafficCounters& c = lib.engine->counters();
  statistics->wire_bytes_sent = c.wire_bytes_sent;
  statistics->wire_bytes_received = c.wire_bytes_received;
  statistics->operations = c.operations;
  statistics->allreduce_bytes = c.allreduce_bytes;
  return THREELC_OK;
}

int64_t threelc_feedback_save(const char* prefix, void* buffer, size_t capacity) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  return guarded<int64_t>("threelc_feedback_save: ", [&] {
    const std::span<std::byte> out(static_cast<std::byte*>(buffer), buffer ? capacity : 0);
    return static_cast<int64_t>(lib.engine->save_feedback(prefix ? prefix : "", out));
  });
}

int threelc_feedback_load(const char* prefix, const void* blob, size_t bytes) {
  std::shared_lock lock(lib.mutex);
  if (!lib.engine) return fail(THREELC_ENOTINIT, not_initialized);
  if (blob == nullptr && bytes > 0)
    return fail(THREELC_EINVAL, "threelc_feedback_load: blob is NULL");
  return guarded<int>("threelc_feedback_load: ", [&] {
    lib.engine->load_feedback(
        prefix ? prefix : "",
        std::span<const std::byte>(static_cast<const std::byte*>(blob), bytes));
    return THREELC_OK;
  });
}

const char* threelc_last_error(void) { return last_error.c_str(); }

int threelc_setting_count(void) { return static_cast<int>(setting_entries().size()); }

int threelc_setting_at(int index, threelc_setting* out) {
  const auto& entries = setting_entries();
  if (out == nullptr) return fail(THREELC_EINVAL, "threelc_setting_at: out is NULL");
  if (index < 0 || static_cast<size_t>(index) >= entries.size()) {
    return fail(THREELC_EINVAL, "threelc_setting_at: index " + std::to_string(index) +
                                    " is not in [0, " + std::to_string(entries.size()) + ")");
  }
  const auto& [layer, row] = entries[static_cast<size_t>(index)];
  *out = {row->name,          layer,         threelc::settings::type_name(row->type),
          row->default_value, row->accepted, row->meaning,
          row->details};
  return THREELC_OK;
}

}  // extern "C"
