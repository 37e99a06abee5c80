// The response cache of negotiation: exact matches, LRU order and eviction, capacity zero, the
// kinds it caches, and caches fed the same uses staying identical (against a model).
#include <gtest/gtest.h>

#include "varied_messages.h"

namespace negotiation_test {
namespace {

TEST(ResponseCache, EmptyCacheFindsNothing) {
  const te::ResponseCache cache(4);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.find(op_request("a")).has_value());
  EXPECT_THROW(cache.at(0), te::NegotiationError);
  EXPECT_THROW(cache.at(3), te::NegotiationError);
}

TEST(ResponseCache, FindsOnlyExactMatches) {
  te::ResponseCache cache(4);
  te::OpRequest a = op_request("a", te::OpKind::kAllreduce, {2, 3});
  a.compress = true;
  a.sparsity = 0.5f;
  cache.use(a);
  ASSERT_EQ(cache.find(a), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.at(0), a);
  EXPECT_EQ(cache.size(), 1u);
  std::vector<std::pair<std::string, te::OpRequest>> variants;
  const auto variant = [&](const std::string& what, auto change) {
    te::OpRequest v = a;
    change(v);
    variants.emplace_back(what, v);
  };
  variant("name", [](te::OpRequest& v) { v.name = "b"; });
  variant("kind", [](te::OpRequest& v) { v.kind = te::OpKind::kBroadcast; });
  variant("dtype", [](te::OpRequest& v) { v.dtype = te::ElementType::kFloat16; });
  variant("shape", [](te::OpRequest& v) { v.shape = {3, 2}; });
  variant("rank of shape", [](te::OpRequest& v) { v.shape = {2, 3, 1}; });
  variant("op", [](te::OpRequest& v) { v.op = te::ReduceOp::kAverage; });
  variant("prescale", [](te::OpRequest& v) { v.prescale = 0.5; });
  variant("postscale", [](te::OpRequest& v) { v.postscale = 2.0; });
  variant("compress", [](te::OpRequest& v) { v.compress = false; });
  variant("sparsity", [](te::OpRequest& v) { v.sparsity = 0.25f; });
  variant("root", [](te::OpRequest& v) { v.root = 1; });
  variant("splits", [](te::OpRequest& v) { v.splits = {1}; });
  variant("device", [](te::OpRequest& v) { v.device = 0; });
  for (const auto& [what, v] : variants) {
    EXPECT_FALSE(cache.find(v).has_value()) << "differs in " << what;
  }
}

TEST(ResponseCache, UseRefreshesAndReplacesSameNameInPlace) {
  te::ResponseCache cache(3);
  const te::OpRequest a = op_request("a");
  const te::OpRequest b = op_request("b");
  const te::OpRequest c = op_request("c");
  cache.use(a);
  cache.use(b);
  cache.use(a);  // again: same slot, no new entry
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(a), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(b), std::optional<uint32_t>(1));
  te::OpRequest a2 = a;
  a2.shape = {9};
  cache.use(a2);  // the new request of that name takes the old one's slot
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(a2), std::optional<uint32_t>(0));
  EXPECT_FALSE(cache.find(a).has_value());
  EXPECT_EQ(cache.at(0), a2);
  cache.use(c);
  EXPECT_EQ(cache.find(c), std::optional<uint32_t>(2));
  // Full: replacing a name in place evicts nothing.
  te::OpRequest b2 = b;
  b2.dtype = te::ElementType::kInt32;
  cache.use(b2);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(b2), std::optional<uint32_t>(1));
  EXPECT_EQ(cache.find(a2), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(c), std::optional<uint32_t>(2));
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedAtCapacity) {
  te::ResponseCache cache(3);
  const auto r = [](const char* name) { return op_request(name); };
  cache.use(r("a"));  // slot 0
  cache.use(r("b"));  // slot 1
  cache.use(r("c"));  // slot 2
  cache.use(r("a"));  // refreshed: b is now the least recently used
  cache.use(r("d"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.find(r("b")).has_value());
  EXPECT_EQ(cache.find(r("d")), std::optional<uint32_t>(1));
  EXPECT_EQ(cache.find(r("a")), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(r("c")), std::optional<uint32_t>(2));
  cache.use(r("e"));  // c (used third) is now the oldest
  EXPECT_FALSE(cache.find(r("c")).has_value());
  EXPECT_EQ(cache.find(r("e")), std::optional<uint32_t>(2));
  EXPECT_EQ(cache.at(2), r("e"));
  cache.use(r("b"));  // a is the oldest now
  EXPECT_EQ(cache.find(r("b")), std::optional<uint32_t>(0));
  EXPECT_FALSE(cache.find(r("a")).has_value());
  // A replaced-in-place entry counts as just used.
  te::OpRequest d2 = r("d");
  d2.shape = {1};
  cache.use(d2);      // slot 1, now the newest
  cache.use(r("f"));  // the oldest is e (slot 2)
  EXPECT_EQ(cache.find(r("f")), std::optional<uint32_t>(2));
  EXPECT_EQ(cache.find(d2), std::optional<uint32_t>(1));
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  te::ResponseCache cache(0);
  cache.use(op_request("a"));
  cache.use(op_request("a"));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.find(op_request("a")).has_value());
  EXPECT_THROW(cache.at(0), te::NegotiationError);
}

TEST(ResponseCache, OnlyAllreduceBroadcastAndReducescatterAreCached) {
  const std::vector<std::pair<te::OpKind, bool>> kinds = {{te::OpKind::kAllreduce, true},
                                                          {te::OpKind::kBroadcast, true},
                                                          {te::OpKind::kAllgather, false},
                                                          {te::OpKind::kReducescatter, true},
                                                          {te::OpKind::kAlltoall, false},
                                                          {te::OpKind::kBarrier, false},
                                                          {te::OpKind::kJoin, false},
                                                          {te::OpKind::kAddProcessSet, false},
                                                          {te::OpKind::kRemoveProcessSet, false}};
  for (const auto& [kind, cacheable] : kinds) {
    SCOPED_TRACE(te::op_kind_name(kind));
    const te::OpRequest r = op_request("t", kind);
    EXPECT_EQ(te::ResponseCache::cacheable(r), cacheable);
    te::ResponseCache cache(4);
    cache.use(r);
    cache.use(r);
    EXPECT_EQ(cache.find(r).has_value(), cacheable);
    EXPECT_EQ(cache.size(), cacheable ? 1u : 0u);
  }
}

// One name in two process sets is two entries: neither replaces the other.
TEST(ResponseCache, OneNameInTwoProcessSetsKeepsTwoSlots) {
  te::ResponseCache cache(4);
  const te::OpRequest global = op_request("w");
  te::OpRequest in_set = op_request("w");
  in_set.process_set = 2;
  cache.use(global);
  cache.use(in_set);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(global), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(in_set), std::optional<uint32_t>(1));
  EXPECT_EQ(cache.at(1).process_set, 2);
}

// A model of the documented policy (free slot, else the slot of the same name and process set, else
// the least recently used) to compare the cache against, slot by slot.
class ModelCache {
 public:
  explicit ModelCache(size_t capacity) : capacity_(capacity) {}
  void use(const te::OpRequest& r) {
    if (capacity_ == 0 || !te::ResponseCache::cacheable(r)) return;
    ++clock_;
    for (auto& s : slots_) {
      if (s.request.name == r.name && s.request.process_set == r.process_set) {
        s = {r, clock_};
        return;
      }
    }
    if (slots_.size() < capacity_) {
      slots_.push_back({r, clock_});
      return;
    }
    size_t oldest = 0;
    for (size_t i = 1; i < slots_.size(); ++i) {
      if (slots_[i].used < slots_[oldest].used) oldest = i;
    }
    slots_[oldest] = {r, clock_};
  }
  std::optional<te::OpRequest> at(size_t slot) const {
    if (slot >= slots_.size()) return std::nullopt;
    return slots_[slot].request;
  }

 private:
  struct Slot {
    te::OpRequest request;
    uint64_t used;
  };
  size_t capacity_;
  uint64_t clock_ = 0;
  std::vector<Slot> slots_;
};

std::optional<te::OpRequest> slot_of(const te::ResponseCache& cache, uint32_t slot) {
  try {
    return cache.at(slot);
  } catch (const te::NegotiationError&) {
    return std::nullopt;
  }
}

TEST(ResponseCache, CachesFedTheSameUsesStayIdentical) {
  constexpr size_t kCapacity = 8;
  te::ResponseCache first(kCapacity);
  te::ResponseCache second(kCapacity);
  ModelCache model(kCapacity);
  std::mt19937 rng(12345);
  for (int step = 0; step < 3000; ++step) {
    const auto kind = static_cast<te::OpKind>(rng() % te::kOpKindCount);
    te::OpRequest r = op_request("t" + std::to_string(rng() % 20), kind);
    r.shape = {static_cast<int64_t>(rng() % 3)};      // the same name comes back changed
    r.process_set = static_cast<int32_t>(rng() % 2);  // or in another process set
    first.use(r);
    second.use(r);
    model.use(r);
    ASSERT_EQ(first.size(), second.size()) << "step " << step;
    for (uint32_t slot = 0; slot <= kCapacity; ++slot) {
      const auto a = slot_of(first, slot);
      ASSERT_EQ(a, slot_of(second, slot)) << "step " << step << " slot " << slot;
      ASSERT_EQ(a, model.at(slot)) << "step " << step << " slot " << slot;
      if (a) {
        ASSERT_EQ(first.find(*a), std::optional<uint32_t>(slot));
      }
    }
  }
  EXPECT_EQ(first.size(), kCapacity);
}

}  // namespace
}  // namespace negotiation_test
