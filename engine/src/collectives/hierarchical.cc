#include "collectives/hierarchical.h"

#include <algorithm>
#include <stdexcept>

#include "collectives/allgather.h"
#include "collectives/reducescatter.h"

namespace threelc::engine {

namespace {

// A CollectiveError from a collective among `local` names a member; say which job rank it is.
template <typename Body>
void naming_job_ranks(const RankSubset& local, Body&& body) {
  try {
    body();
  } catch (const CollectiveError& e) {
    if (e.peer() < 0) throw;
    const int job_rank = local.job_rank(e.peer());
    throw CollectiveError(job_rank, std::string(e.what()) + " (local rank " +
                                        std::to_string(e.peer()) + " of this host is rank " +
                                        std::to_string(job_rank) + ")");
  }
}

std::vector<size_t> byte_counts(std::span<const size_t> counts) {
  std::vector<size_t> bytes;
  for (size_t c : counts) bytes.push_back(c * sizeof(float));
  return bytes;
}

}  // namespace

std::span<const float> HostLocalExchange::reduce_scatter(std::span<const float> values,
                                                         std::span<const size_t> counts) {
  const auto self = static_cast<size_t>(local_.rank());
  segment_.resize(counts[self] * sizeof(float));
  naming_job_ranks(local_, [&] {
    reducescatter(local_, std::as_bytes(values), ElementType::kFloat32, ReduceOp::kSum, counts,
                  std::span<std::byte>(segment_), options_);
  });
  return {reinterpret_cast<const float*>(segment_.data()), counts[self]};
}

void HostLocalExchange::allgather(std::span<float> values, std::span<const size_t> counts) {
  size_t offset = 0;
  for (int r = 0; r < local_.rank(); ++r) offset += counts[static_cast<size_t>(r)];
  const std::span<const std::byte> mine =
      std::as_bytes(values.subspan(offset, counts[static_cast<size_t>(local_.rank())]));
  const std::vector<size_t> bytes = byte_counts(counts);
  CollectiveOptions options = options_;
  options.tag_base = options_.tag_base + 1;
  naming_job_ranks(
      local_, [&] { allgatherv(local_, mine, std::as_writable_bytes(values), bytes, options); });
}

HierarchicalSegment hierarchical_segment(std::span<const TensorSlice> tensors, size_t total,
                                         size_t parts, size_t index) {
  if (parts == 0 || index >= parts) {
    throw std::invalid_argument("hierarchical_segment: segment " + std::to_string(index) + " of " +
                                std::to_string(parts));
  }
  HierarchicalSegment s;
  for (size_t i = 0; i < parts; ++i) s.counts.push_back(total / parts + (i < total % parts));
  for (size_t i = 0; i < index; ++i) s.offset += s.counts[i];
  s.count = s.counts[index];
  const size_t end = s.offset + s.count;
  size_t covered = s.offset;  // the segment is described up to here
  for (const TensorSlice& t : tensors) {
    const size_t first = std::max(t.offset, s.offset);
    const size_t last = std::min(t.offset + t.count, end);
    if (first >= last) continue;
    s.slices.push_back(
        {t.name + "#" + std::to_string(first - t.offset) + "+" + std::to_string(last - first),
         first - s.offset, last - first});
    covered = last;
  }
  if (covered < end) s.slices.push_back({"#padding", covered - s.offset, end - covered});
  return s;
}

}  // namespace threelc::engine
