// Horovod's response cache: every rank keeps the same table of recently run requests, so in a
// steady training loop a rank tells the coordinator "slot 12 is ready" instead of sending the
// request, and the coordinator answers with slots too. All ranks apply the same updates in the
// same order (after each cycle's responses), so the tables never diverge.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/operation.h"

namespace threelc::engine {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}

  // Only requests identical on every rank are cached (not allgather, alltoall, join, nor the
  // process sets' add and remove).
  static bool cacheable(const OpRequest& request);

  // The slot holding exactly `request`, if any.
  std::optional<uint32_t> find(const OpRequest& request) const;
  // The request in `slot`; throws NegotiationError for an empty or unknown slot.
  const OpRequest& at(uint32_t slot) const;
  // Marks `request` as just used, inserting it (over the least recently used slot when full,
  // or over the slot of an older request of the same name in the same process set).
  void use(const OpRequest& request);

  size_t size() const { return by_key_.size(); }

 private:
  struct Entry {
    OpRequest request;
    uint64_t last_used = 0;
    bool occupied = false;
  };
  size_t capacity_;
  uint64_t clock_ = 0;
  std::vector<Entry> slots_;
  std::unordered_map<OpKey, uint32_t, OpKeyHash> by_key_;
};

}  // namespace threelc::engine
