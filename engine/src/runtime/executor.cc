#include "runtime/executor.h"

#include <cstring>
#include <numeric>
#include <stdexcept>

#include "collectives/allgather.h"
#include "collectives/alltoall.h"
#include "collectives/broadcast.h"
#include "collectives/reduce_ops.h"
#include "collectives/reducescatter.h"
#include "engine_error.h"
#include "negotiation/process_sets.h"

namespace threelc::engine {

namespace {

CollectiveOptions collective_options(size_t chunk_bytes, uint32_t tag,
                                     CollectiveObserver* observer) {
  CollectiveOptions options;
  options.chunk_bytes = chunk_bytes;
  options.tag_base = tag;
  options.observer = observer;
  return options;
}

// The shape with the first dimension replaced (a scalar becomes a vector of `rows`).
std::vector<int64_t> with_rows(const std::vector<int64_t>& shape, int64_t rows) {
  std::vector<int64_t> out = shape.empty() ? std::vector<int64_t>{1} : shape;
  out[0] = rows;
  return out;
}

}  // namespace

Executor::Executor(transport::Context& context, const ExecutorOptions& options)
    : context_(context), options_(options), feedback_(options.feedback_limit, context.rank()) {
  if (context_.size() > kMaxRanks) {
    throw EngineError(THREELC_EINVAL, "a job of " + std::to_string(context_.size()) +
                                          " ranks: the engine's collectives take at most " +
                                          std::to_string(kMaxRanks) + " ranks");
  }
  if (options_.hierarchical) {
    local_ranks_ = std::make_unique<RankSubset>(context_, options_.hierarchical->local);
    cross_ranks_ = std::make_unique<RankSubset>(context_, options_.hierarchical->cross);
    host_exchange_ = std::make_unique<HostLocalExchange>(
        *local_ranks_, collective_options(options_.chunk_bytes, kHierarchicalTag, nullptr));
  }
}

RunScope Executor::scope_of(const Response& response, std::span<const int32_t> members) {
  const int32_t set = response.tensors[0].process_set;
  if (set == kGlobalProcessSet) return {.ranks = context_, .members = members, .global = true};
  std::unique_ptr<RankSubset>& subset = subsets_[set];
  if (!subset) {
    const std::vector<int> ranks(members.begin(), members.end());
    subset = std::make_unique<RankSubset>(context_, ranks);
  }
  return {.ranks = *subset, .members = members, .global = false};
}

std::vector<OpResult> Executor::run(const Response& response,
                                    std::span<const Operation* const> local,
                                    CollectiveObserver* observer,
                                    std::span<const int32_t> members) {
  const RunScope scope = scope_of(response, members);
  std::vector<OpResult> results(response.tensors.size());
  switch (response.kind) {
    case OpKind::kAllreduce:
      allreduce(scope, response, local, observer);
      break;
    case OpKind::kBroadcast:
      broadcast(scope, response, local[0], observer);
      break;
    case OpKind::kAllgather:
      results[0] = allgather(scope, response, local[0], observer);
      break;
    case OpKind::kReducescatter:
      results[0] = reducescatter(scope, response, local[0], observer);
      break;
    case OpKind::kAlltoall:
      results[0] = alltoall(scope, response, local[0], observer);
      break;
    case OpKind::kBarrier:
      break;  // negotiation itself was the barrier: every rank had arrived
    case OpKind::kJoin:
      results[0].last_joined_rank = response.last_joined_rank;
      break;
    case OpKind::kAddProcessSet:
    case OpKind::kRemoveProcessSet:
      break;  // the background loop's: they change its tables, not data
  }
  return results;
}

void Executor::forget_process_set(int32_t id) {
  subsets_.erase(id);
  residuals_.drop(feedback_prefix(id));
}

void Executor::broadcast(const RunScope& scope, const Response& response, const Operation* local,
                         CollectiveObserver* observer) {
  const OpRequest& t = response.tensors[0];
  auto* out = static_cast<std::byte*>(local->output);
  const int root = scope.set_rank_of(t.root);  // the root is a job rank
  if (scope.ranks.rank() == root && out != local->input && t.bytes() > 0) {
    std::memcpy(out, local->input, t.bytes());
  }
  engine::broadcast(scope.ranks, std::span<std::byte>(out, t.bytes()), root,
                    collective_options(options_.chunk_bytes, kBroadcastTag, observer));
}

OpResult Executor::allgather(const RunScope& scope, const Response& response,
                             const Operation* local, CollectiveObserver* observer) {
  const OpRequest& t = response.tensors[0];
  const size_t row_bytes = t.row_elements() * element_size(t.dtype);
  std::vector<size_t> bytes_per_rank;
  int64_t rows = 0;
  for (int64_t r : response.per_rank) {
    bytes_per_rank.push_back(static_cast<size_t>(r) * row_bytes);
    rows += r;
  }
  OpResult result;
  result.dtype = t.dtype;
  result.shape = with_rows(t.shape, rows);
  result.data.resize(static_cast<size_t>(rows) * row_bytes);
  const size_t mine = bytes_per_rank[static_cast<size_t>(scope.ranks.rank())];
  const auto* input = local ? static_cast<const std::byte*>(local->input) : nullptr;
  engine::allgatherv(scope.ranks, std::span<const std::byte>(input, input ? mine : 0), result.data,
                     bytes_per_rank,
                     collective_options(options_.chunk_bytes, kAllgatherTag, observer));
  return result;
}

OpResult Executor::reducescatter(const RunScope& scope, const Response& response,
                                 const Operation* local, CollectiveObserver* observer) {
  const OpRequest& t = response.tensors[0];
  const int size = scope.ranks.size();
  const int rank = scope.ranks.rank();
  if (size < 1) throw std::logic_error("reducescatter among no ranks");
  const int64_t rows = t.rows();
  std::vector<size_t> elements_per_rank;
  for (int r = 0; r < size; ++r) {
    const int64_t my_rows = rows / size + (r < rows % size ? 1 : 0);
    elements_per_rank.push_back(static_cast<size_t>(my_rows) * t.row_elements());
  }
  const size_t element_bytes = element_size(t.dtype);
  std::span<const std::byte> input(static_cast<const std::byte*>(local->input), t.bytes());
  std::vector<std::byte> scaled;
  if (t.prescale != 1.0) {
    scaled.assign(input.begin(), input.end());
    scale_values(t.dtype, scaled.data(), t.element_count(), t.prescale);
    input = scaled;
  }
  const size_t mine = elements_per_rank[static_cast<size_t>(rank)];
  OpResult result;
  result.dtype = t.dtype;
  result.shape = with_rows(t.shape, rows / size + (rank < rows % size ? 1 : 0));
  result.data.resize(mine * element_bytes);
  engine::reducescatter(scope.ranks, input, t.dtype, t.op, elements_per_rank, result.data,
                        collective_options(options_.chunk_bytes, kReducescatterTag, observer));
  if (t.op == ReduceOp::kAverage) divide_values(t.dtype, result.data.data(), mine, size);
  if (t.postscale != 1.0) scale_values(t.dtype, result.data.data(), mine, t.postscale);
  return result;
}

OpResult Executor::alltoall(const RunScope& scope, const Response& response, const Operation* local,
                            CollectiveObserver* observer) {
  const OpRequest& t = response.tensors[0];
  const auto size = static_cast<size_t>(scope.ranks.size());
  const auto rank = static_cast<size_t>(scope.ranks.rank());
  const size_t row_bytes = t.row_elements() * element_size(t.dtype);
  std::vector<size_t> send_bytes(size);
  std::vector<size_t> recv_bytes(size);
  OpResult result;
  result.dtype = t.dtype;
  int64_t rows = 0;
  for (size_t j = 0; j < size; ++j) {
    send_bytes[j] = static_cast<size_t>(response.per_rank[rank * size + j]) * row_bytes;
    const int64_t in = response.per_rank[j * size + rank];
    recv_bytes[j] = static_cast<size_t>(in) * row_bytes;
    result.received_splits.push_back(in);
    rows += in;
  }
  result.shape = with_rows(t.shape, rows);
  result.data.resize(static_cast<size_t>(rows) * row_bytes);
  const size_t total_send = std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0});
  engine::alltoallv(
      scope.ranks,
      std::span<const std::byte>(static_cast<const std::byte*>(local->input), total_send),
      send_bytes, result.data, recv_bytes,
      collective_options(options_.chunk_bytes, kAlltoallTag, observer));
  return result;
}

}  // namespace threelc::engine
