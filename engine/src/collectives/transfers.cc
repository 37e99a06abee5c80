#include "collectives/transfers.h"

#include "collectives/collective_error.h"

namespace threelc::engine::detail {

size_t Transfers::receive(int peer, uint32_t tag, std::span<std::byte> into, size_t tensor,
                          bool exact) {
  receives_.push_back(
      Posted{ctx_.pair(peer).recv(tag, into), peer, tag, into.size(), tensor, 0, exact, false});
  return receives_.size() - 1;
}

void Transfers::send(int peer, uint32_t tag, std::span<const std::byte> bytes, size_t tensor) {
  const int64_t begin = event_start(observer_);
  sends_.push_back(Posted{ctx_.pair(peer).send(tag, bytes), peer, tag, bytes.size(), tensor, begin,
                          true, false});
}

size_t Transfers::wait(size_t id) {
  Posted& r = receives_[id];
  const int64_t begin = event_start(observer_);
  r.waited = true;
  const size_t got = r.request.wait();
  record_event(observer_, Phase::kReceive, r.tensor, begin, got, r.peer);
  if (r.exact && got != r.bytes) {
    throw CollectiveError(r.peer, who_ + ": message from rank " + std::to_string(r.peer) +
                                      " (tag " + std::to_string(r.tag) + ") has " +
                                      std::to_string(got) + " bytes, expected " +
                                      std::to_string(r.bytes));
  }
  return got;
}

void Transfers::wait_sends() {
  for (Posted& s : sends_) {
    if (s.waited) continue;
    s.waited = true;
    s.request.wait();
    record_event(observer_, Phase::kSend, s.tensor, s.posted_ns, s.bytes, s.peer);
  }
}

void Transfers::drain() noexcept {
  for (auto* list : {&receives_, &sends_}) {
    for (Posted& p : *list) {
      if (p.waited) continue;
      p.waited = true;
      try {
        p.request.wait();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the first failure is what matters
      }
    }
  }
}

}  // namespace threelc::engine::detail
