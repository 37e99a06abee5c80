#include "error_feedback.h"

#include <algorithm>

#include "engine_error.h"
#include "feedback_blob.h"
#include "threelc/threelc.h"

namespace threelc::engine {

namespace {

const char* const kIncomplete =
    "this rank's error feedback is incomplete: a compressed allreduce failed while updating it "
    "(the engine has stopped; see the error it stopped with)";

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

}  // namespace

std::span<float> ErrorFeedbackStore::get(const std::string& name, size_t count) {
  auto [it, inserted] = buffers_.try_emplace(name);
  if (inserted || it->second.size() != count) it->second.assign(count, 0.0f);
  return it->second;
}

std::optional<std::vector<float>> ErrorFeedbackStore::take(const std::string& name, size_t count) {
  auto it = buffers_.find(name);
  if (it == buffers_.end() || it->second.size() != count) return std::nullopt;
  std::vector<float> values = std::move(it->second);
  buffers_.erase(it);
  return values;
}

void ErrorFeedbackStore::add_holder(ResidualHolder* holder) {
  std::lock_guard lock(mutex_);
  holders_.push_back(holder);
}

void ErrorFeedbackStore::remove_holder(ResidualHolder* holder) {
  std::lock_guard lock(mutex_);
  std::erase(holders_, holder);
}

void ErrorFeedbackStore::drop(std::string_view prefix) {
  std::lock_guard lock(mutex_);
  std::erase_if(buffers_, [&](const auto& entry) { return entry.first.starts_with(prefix); });
  for (ResidualHolder* holder : holders_) holder->forget(prefix);
}

std::string feedback_prefix(int32_t process_set) {
  return "process_set." + std::to_string(process_set) + "/";
}

std::string feedback_key(int32_t process_set, const std::string& name) {
  return process_set == 0 ? name : feedback_prefix(process_set) + name;
}

size_t ErrorFeedbackStore::save(std::string_view prefix, uint32_t rank, uint32_t job_size,
                                std::span<std::byte> out) {
  std::lock_guard lock(mutex_);
  if (incomplete_) throw EngineError(THREELC_EPEER, kIncomplete);
  // A name lives in one place: the store until a holder's first use takes it, then the holder.
  std::unordered_map<std::string, std::vector<float>> held;
  for (ResidualHolder* holder : holders_) holder->copy_out(prefix, held);
  std::vector<FeedbackEntryView> entries;
  auto add = [&](const std::string& name, std::span<const float> values) {
    const std::string problem = feedback_name_problem(name);
    if (!problem.empty()) {
      throw EngineError(THREELC_EINVAL, "the error feedback of tensor " + quoted(name) +
                                            " cannot be saved: its name " + problem +
                                            " (pass a prefix that leaves it out)");
    }
    entries.push_back({name, values});
  };
  for (const auto& [name, values] : held) add(name, values);
  for (const auto& [name, values] : buffers_) {
    if (name.starts_with(prefix) && !held.contains(name)) add(name, values);
  }
  std::sort(entries.begin(), entries.end(),
            [](const FeedbackEntryView& a, const FeedbackEntryView& b) { return a.name < b.name; });
  const size_t bytes = feedback_blob_size(entries);
  if (out.size() >= bytes) write_feedback_blob(rank, job_size, entries, out.first(bytes));
  return bytes;
}

void ErrorFeedbackStore::load(std::string_view prefix, uint32_t rank, uint32_t job_size,
                              std::span<const std::byte> blob) {
  FeedbackBlob parsed = parse_feedback_blob(blob);  // FeedbackBlobError: EMALFORMED
  if (parsed.rank != rank || parsed.size != job_size) {
    throw EngineError(THREELC_EINVAL, "the feedback blob was saved by rank " +
                                          std::to_string(parsed.rank) + " of a job of " +
                                          std::to_string(parsed.size) + " ranks; this is rank " +
                                          std::to_string(rank) + " of " + std::to_string(job_size) +
                                          " (every rank loads the blob it saved itself)");
  }
  std::unordered_map<std::string, std::vector<float>> incoming;
  incoming.reserve(parsed.entries.size());
  for (auto& [name, values] : parsed.entries) {
    if (!name.starts_with(prefix)) {
      throw EngineError(THREELC_EINVAL, "the feedback blob holds tensor " + quoted(name) +
                                            ", whose name does not start with the prefix " +
                                            quoted(prefix));
    }
    incoming.emplace(std::move(name), std::move(values));
  }
  std::lock_guard lock(mutex_);
  if (incomplete_) throw EngineError(THREELC_EPEER, kIncomplete);
  // reserve() is the only step that can fail (allocating buckets); after it, erasing and
  // moving the parsed nodes in allocate nothing and cannot rehash, so no error leaves the
  // store half replaced.
  buffers_.reserve(buffers_.size() + incoming.size());
  std::erase_if(buffers_, [&](const auto& entry) { return entry.first.starts_with(prefix); });
  buffers_.merge(incoming);
  for (ResidualHolder* holder : holders_) holder->forget(prefix);
}

}  // namespace threelc::engine
