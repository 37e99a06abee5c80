// ErrorFeedbackStore with holders: residuals kept in other memory (a CUDA device's, in the
// engine) go into a checkpoint with the store's own, a load leaves them in the store for the
// holder's next use, and removing a process set drops them too. The holder here keeps its
// buffers in a map of its own, as DeviceResiduals keeps them on a device.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "error_feedback.h"
#include "feedback_blob.h"

namespace te = threelc::engine;

namespace {

class MapHolder final : public te::ResidualHolder {
 public:
  void copy_out(std::string_view prefix,
                std::unordered_map<std::string, std::vector<float>>& into) override {
    for (const auto& [name, values] : buffers) {
      if (name.starts_with(prefix)) into[name] = values;
    }
  }
  void forget(std::string_view prefix) override {
    std::erase_if(buffers, [&](const auto& entry) { return entry.first.starts_with(prefix); });
  }
  std::map<std::string, std::vector<float>> buffers;
};

std::vector<std::byte> saved(te::ErrorFeedbackStore& store, const std::string& prefix) {
  std::vector<std::byte> out(store.save(prefix, 1, 4, {}));
  store.save(prefix, 1, 4, out);
  return out;
}

TEST(ResidualHolders, TheirResidualsAreSavedWithTheStoresSortedByName) {
  te::ErrorFeedbackStore store;
  MapHolder device;
  store.add_holder(&device);
  store.get("host.w", 2)[1] = 5.0f;
  device.buffers["device.w"] = {1.0f, -2.0f, 3.0f};
  device.buffers["other"] = {9.0f};
  const te::FeedbackBlob blob = te::parse_feedback_blob(saved(store, ""));
  ASSERT_EQ(blob.entries.size(), 3u);
  EXPECT_EQ(blob.entries[0].first, "device.w");
  EXPECT_EQ(blob.entries[0].second, (std::vector<float>{1.0f, -2.0f, 3.0f}));
  EXPECT_EQ(blob.entries[1].first, "host.w");
  EXPECT_EQ(blob.entries[1].second, (std::vector<float>{0.0f, 5.0f}));
  EXPECT_EQ(blob.entries[2].first, "other");
  EXPECT_EQ(te::parse_feedback_blob(saved(store, "device.")).entries.size(), 1u);
  store.remove_holder(&device);
  EXPECT_EQ(te::parse_feedback_blob(saved(store, "")).entries.size(), 1u);
}

TEST(ResidualHolders, ALoadLeavesTheValuesInTheStoreForTheHoldersNextUse) {
  te::ErrorFeedbackStore store;
  MapHolder device;
  store.add_holder(&device);
  device.buffers["d.w"] = {1.0f, 2.0f};
  const std::vector<std::byte> blob = saved(store, "d.");
  device.buffers["d.w"] = {7.0f, 7.0f};  // a later step
  device.buffers["d.stale"] = {3.0f};
  device.buffers["kept"] = {4.0f};
  store.load("d.", 1, 4, blob);
  EXPECT_EQ(device.buffers.size(), 1u);  // forgot what the load replaced, kept the rest
  EXPECT_TRUE(device.buffers.contains("kept"));
  EXPECT_FALSE(store.take("d.w", 3).has_value());  // another element count: starts from zeros
  EXPECT_EQ(store.take("d.w", 2), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_FALSE(store.contains("d.w"));  // taken: it lives in the holder now
  EXPECT_FALSE(store.take("d.w", 2).has_value());
}

TEST(ResidualHolders, DroppingAPrefixDropsTheHoldersResidualsToo) {
  te::ErrorFeedbackStore store;
  MapHolder device;
  store.add_holder(&device);
  device.buffers["process_set.2/w"] = {1.0f};
  device.buffers["w"] = {2.0f};
  store.drop(te::feedback_prefix(2));
  ASSERT_EQ(device.buffers.size(), 1u);
  EXPECT_TRUE(device.buffers.contains("w"));
}

}  // namespace
