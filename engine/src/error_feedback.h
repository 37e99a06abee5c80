// Error-feedback memory of one rank: one fp32 buffer per tensor name, kept across steps and
// independent of how tensors are fused. A tensor of a process set other than 0 keeps its buffer
// under its name prefixed by the set (feedback_key), so that the same name in two sets keeps
// two residuals. It holds the push residuals where this rank does not
// own a position and the pull residual where it does (see docs/DESIGN.md, "Error feedback on
// both sides").
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace threelc::engine {

// Residuals kept in other memory than the store's own (a CUDA device's: gpu/device_memory.h),
// which checkpoints save and load with the store's. Called only under the store's mutex, so
// never while a compressed allreduce writes them.
class ResidualHolder {
 public:
  virtual ~ResidualHolder() = default;
  // Host copies of the buffers whose names start with `prefix`, added to `into`.
  virtual void copy_out(std::string_view prefix,
                        std::unordered_map<std::string, std::vector<float>>& into) = 0;
  // Forgets the buffers whose names start with `prefix`: a load replaced them (the next use
  // takes the loaded values from the store, take()), or their process set was removed.
  virtual void forget(std::string_view prefix) = 0;
};

class ErrorFeedbackStore {
 public:
  // Checkpoints (threelc_feedback_save / _load) read and replace the buffers from framework
  // threads while the background thread's compressed allreduces write them. One mutex orders
  // the two: the background thread holds an Update for the whole of each compressed allreduce
  // (every get() and every write through the spans it returns happen under it), and save() and
  // load() take the same mutex. A snapshot therefore always falls between two collectives and
  // a load never lands inside one; a caller blocks at most for the collective in progress. This
  // is simpler than routing save/load through the background thread's cycle (they would need a
  // request of their own, and a stopped engine would never answer), and costs next to nothing:
  // while nobody checkpoints the background thread is the mutex's only user.
  class Update {
   public:
    explicit Update(ErrorFeedbackStore& store) : store_(store), lock_(store.mutex_) {
      store_.incomplete_ = true;
    }
    // The collective finished. An Update destroyed without done() (the collective threw halfway,
    // and the engine stops) leaves the residuals marked incomplete: save() and load() refuse.
    void done() { store_.incomplete_ = false; }

   private:
    ErrorFeedbackStore& store_;
    std::lock_guard<std::mutex> lock_;
  };

  // The buffer of `name`, zero-initialized with `count` elements on first use. A name reused
  // with another element count starts again from zeros: a residual of one shape means nothing
  // to a tensor of another (every rank sees the same counts, so every rank starts again).
  // A store shared between threads is only used under an Update.
  std::span<float> get(const std::string& name, size_t count);

  // The store's buffer of `name` when it has `count` elements, moved out of the store (nullopt
  // otherwise): a holder's first use of a name takes what a load left here. Under an Update.
  std::optional<std::vector<float>> take(const std::string& name, size_t count);

  // Holders whose residuals save(), load() and drop() cover too; a holder is removed before it
  // is destroyed. Both take the mutex.
  void add_holder(ResidualHolder* holder);
  void remove_holder(ResidualHolder* holder);

  bool contains(const std::string& name) const { return buffers_.count(name) != 0; }
  // Forgets every buffer whose name starts with `prefix` (a removed process set's), the
  // holders' too, under the mutex like save and load.
  void drop(std::string_view prefix);
  size_t size() const { return buffers_.size(); }
  void clear() { buffers_.clear(); }

  // The blob (docs/WIRE_FORMAT.md) of the buffers whose names start with `prefix`, the store's
  // and its holders', sorted by name, with `rank` and `job_size` in its header: written into `out`
  // when it fits, and its length returned either way. Throws EngineError: THREELC_EINVAL for a name
  // the blob cannot hold (naming the tensor), THREELC_EPEER when the residuals are incomplete.
  size_t save(std::string_view prefix, uint32_t rank, uint32_t job_size, std::span<std::byte> out);
  // Replaces the buffers whose names start with `prefix` by the blob's (names under the prefix
  // that the blob lacks are dropped); the holders forget theirs, and take the blob's values on
  // their next use. Throws EngineError: THREELC_EMALFORMED for a malformed
  // blob (naming the field and offset), THREELC_EINVAL for a blob of another rank or job size
  // or holding a name outside `prefix`, THREELC_EPEER when the residuals are incomplete. On any
  // error nothing changes.
  void load(std::string_view prefix, uint32_t rank, uint32_t job_size,
            std::span<const std::byte> blob);

 private:
  std::mutex mutex_;
  bool incomplete_ = false;  // a collective failed while writing the buffers
  std::unordered_map<std::string, std::vector<float>> buffers_;
  std::vector<ResidualHolder*> holders_;
};

// The name a tensor's residual is kept under: `name` in the global set (0), else
// "process_set.<id>/<name>" (feedback_prefix(id) + name).
std::string feedback_key(int32_t process_set, const std::string& name);
std::string feedback_prefix(int32_t process_set);

}  // namespace threelc::engine
