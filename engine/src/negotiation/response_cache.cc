#include "negotiation/response_cache.h"

#include "negotiation/wire.h"

namespace threelc::engine {

bool ResponseCache::cacheable(const OpRequest& r) {
  return r.kind == OpKind::kAllreduce || r.kind == OpKind::kBroadcast ||
         r.kind == OpKind::kReducescatter;
}

std::optional<uint32_t> ResponseCache::find(const OpRequest& request) const {
  const auto it = by_key_.find(key_of(request));
  if (it == by_key_.end() || !(slots_[it->second].request == request)) return std::nullopt;
  return it->second;
}

const OpRequest& ResponseCache::at(uint32_t slot) const {
  if (slot >= slots_.size() || !slots_[slot].occupied) {
    throw NegotiationError("response cache slot " + std::to_string(slot) + " is empty");
  }
  return slots_[slot].request;
}

void ResponseCache::use(const OpRequest& request) {
  if (capacity_ == 0 || !cacheable(request)) return;
  ++clock_;
  uint32_t slot = 0;
  if (const auto it = by_key_.find(key_of(request)); it != by_key_.end()) {
    slot = it->second;
  } else if (slots_.size() < capacity_) {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    for (uint32_t i = 1; i < slots_.size(); ++i) {
      if (slots_[i].last_used < slots_[slot].last_used) slot = i;
    }
    by_key_.erase(key_of(slots_[slot].request));
  }
  slots_[slot] = Entry{request, clock_, true};
  by_key_[key_of(request)] = slot;
}

}  // namespace threelc::engine
