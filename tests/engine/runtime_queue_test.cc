// The runtime's bookkeeping: TensorQueue (operations in flight by name) and HandleTable
// (poll / wait / complete / release across threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_error.h"
#include "runtime/handle_table.h"
#include "runtime/operation.h"
#include "runtime/tensor_queue.h"
#include "threelc/threelc.h"

namespace {

namespace te = threelc::engine;
using namespace std::chrono_literals;

te::Operation op(const std::string& name, te::Handle handle,
                 te::OpKind kind = te::OpKind::kAllreduce) {
  te::Operation o;
  o.request.name = name;
  o.request.kind = kind;
  o.request.shape = {static_cast<int64_t>(handle)};
  o.handle = handle;
  o.submitted_ns = handle * 1000;
  return o;
}

// A tensor of the global process set.
te::OpKey key(const std::string& name) { return {te::kGlobalProcessSet, name}; }

std::vector<std::string> names(const std::vector<te::OpRequest>& requests) {
  std::vector<std::string> out;
  out.reserve(requests.size());
  for (const auto& r : requests) out.push_back(r.name);
  return out;
}

using Names = std::vector<std::string>;

// --- TensorQueue ----------------------------------------------------------------------------

TEST(TensorQueue, DuplicateNameIsRefused) {
  te::TensorQueue queue;
  queue.submit(op("a", 1));
  try {
    queue.submit(op("a", 2, te::OpKind::kBroadcast));
    FAIL() << "a second 'a' was accepted";
  } catch (const te::EngineError& e) {
    EXPECT_EQ(e.code(), THREELC_EDUPLICATE);
    EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos) << e.what();
  }
  // The refused submission left nothing behind.
  const auto fresh = queue.take_new();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh[0].shape, std::vector<int64_t>{1});
  const auto taken = queue.take(key("a"));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->handle, 1);
}

TEST(TensorQueue, TakeNewReturnsSubmissionOrderOnce) {
  te::TensorQueue queue;
  EXPECT_TRUE(queue.take_new().empty());
  for (const char* name : {"z", "a", "m", "b"}) queue.submit(op(name, 1));
  EXPECT_EQ(names(queue.take_new()), (Names{"z", "a", "m", "b"}));
  EXPECT_TRUE(queue.take_new().empty());
  queue.submit(op("c", 2));
  EXPECT_EQ(names(queue.take_new()), (Names{"c"}));
  // Taken-new operations are still in flight: their names are still refused.
  EXPECT_THROW(queue.submit(op("z", 3)), te::EngineError);
}

TEST(TensorQueue, TakeThenFinish) {
  te::TensorQueue queue;
  int input = 0;
  int output = 0;
  te::Operation a = op("a", 7);
  a.input = &input;
  a.output = &output;
  queue.submit(a);
  queue.submit(op("b", 8));
  EXPECT_FALSE(queue.take(key("unknown")).has_value());
  const auto taken = queue.take(key("a"));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->handle, 7);
  EXPECT_EQ(taken->input, &input);
  EXPECT_EQ(taken->output, &output);
  EXPECT_EQ(taken->request, a.request);
  EXPECT_EQ(taken->submitted_ns, 7000);
  // Taken once: a second take finds nothing, but the name is in flight until finish.
  EXPECT_FALSE(queue.take(key("a")).has_value());
  EXPECT_THROW(queue.submit(op("a", 9)), te::EngineError);
  queue.finish(key("a"));
  EXPECT_NO_THROW(queue.submit(op("a", 10)));
  const auto again = queue.take(key("a"));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->handle, 10);
  // finish of an unknown name does nothing.
  EXPECT_NO_THROW(queue.finish(key("never")));
  const auto b = queue.take(key("b"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->handle, 8);
}

// An error response may name a tensor this rank never sent (a stall timeout): take_sent leaves
// an operation of that name alone until take_new has handed out its request.
TEST(TensorQueue, TakeSentOnlyTakesWhatTakeNewHandedOut) {
  te::TensorQueue queue;
  queue.submit(op("a", 1));
  EXPECT_FALSE(queue.take_sent(key("a")).has_value());
  EXPECT_FALSE(queue.take_sent(key("unknown")).has_value());
  EXPECT_EQ(names(queue.take_new()), (Names{"a"}));
  const auto taken = queue.take_sent(key("a"));
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->handle, 1);
  EXPECT_FALSE(queue.take_sent(key("a")).has_value());
  queue.finish(key("a"));
  // Submitted again: not sent yet, so still its own.
  queue.submit(op("a", 2));
  EXPECT_FALSE(queue.take_sent(key("a")).has_value());
  EXPECT_EQ(names(queue.take_new()), (Names{"a"}));
  EXPECT_EQ(queue.take_sent(key("a"))->handle, 2);
}

TEST(TensorQueue, TakeAllEmptiesTheQueue) {
  te::TensorQueue queue;
  queue.submit(op("a", 1));
  queue.submit(op("b", 2));
  queue.submit(op("c", 3));
  ASSERT_EQ(queue.take_new().size(), 3u);
  queue.submit(op("d", 4));  // not taken_new yet
  std::vector<te::Operation> all = queue.take_all();
  std::vector<te::Handle> handles;
  handles.reserve(all.size());
  for (const auto& o : all) handles.push_back(o.handle);
  std::sort(handles.begin(), handles.end());
  EXPECT_EQ(handles, (std::vector<te::Handle>{1, 2, 3, 4}));
  EXPECT_TRUE(queue.take_new().empty());  // "d" is gone from the new list too
  EXPECT_TRUE(queue.take_all().empty());
  EXPECT_FALSE(queue.take(key("a")).has_value());
  for (const char* name : {"a", "b", "c", "d"}) EXPECT_NO_THROW(queue.submit(op(name, 5)));
}

// Operations are told apart by (process set, name): one name may be in flight in two sets, but
// not twice in one.
TEST(TensorQueue, OneNameInTwoProcessSets) {
  te::TensorQueue queue;
  te::Operation in_set = op("w", 2);
  in_set.request.process_set = 3;
  queue.submit(op("w", 1));
  queue.submit(in_set);
  te::Operation again = op("w", 4);
  again.request.process_set = 3;
  try {
    queue.submit(again);
    ADD_FAILURE() << "a second 'w' in process set 3 was accepted";
  } catch (const te::EngineError& e) {
    EXPECT_EQ(e.code(), THREELC_EDUPLICATE);
    EXPECT_NE(std::string(e.what()).find("'w' (process set 3)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(names(queue.take_new()), (Names{"w", "w"}));
  EXPECT_EQ(queue.take(te::OpKey{3, "w"})->handle, 2);
  EXPECT_EQ(queue.take(key("w"))->handle, 1);
  queue.finish(te::OpKey{3, "w"});
  EXPECT_NO_THROW(queue.submit(again));
  EXPECT_THROW(queue.submit(op("w", 5)), te::EngineError);  // set 0's is still in flight
}

TEST(TensorQueue, ConcurrentSubmissionsAreAllSeenOnce) {
  te::TensorQueue queue;
  constexpr int kThreads = 4;
  constexpr int kEach = 500;
  std::atomic<int> duplicates{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        queue.submit(op("t" + std::to_string(t) + "/" + std::to_string(i), i + 1));
        // Every thread also races on one shared name: exactly one wins.
        if (i == kEach / 2) {
          try {
            queue.submit(op("shared", 1));
          } catch (const te::EngineError&) {
            ++duplicates;
          }
        }
      }
      ++done;
    });
  }
  std::set<std::string> seen;
  size_t total = 0;
  const auto collect = [&] {
    for (const auto& r : queue.take_new()) {
      EXPECT_TRUE(seen.insert(r.name).second) << r.name << " seen twice";
      ++total;
    }
  };
  while (done.load() < kThreads) {  // take_new races with the submissions
    collect();
    std::this_thread::yield();
  }
  for (auto& t : threads) t.join();
  collect();
  EXPECT_EQ(total, static_cast<size_t>(kThreads * kEach + 1));
  EXPECT_TRUE(queue.take_new().empty());
  EXPECT_EQ(duplicates.load(), kThreads - 1);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kEach + 1));
}

// The background thread's idle wait: it sleeps while nothing is in flight and wakes for a
// submission or a stop, never past its deadline.
TEST(TensorQueue, IdleWaitReturnsAtOnceWhileSomethingIsInFlight) {
  te::TensorQueue queue;
  std::atomic<bool> stop{false};
  queue.submit(op("a", 1));
  (void)queue.take_new();  // sent but not finished: still in flight
  const auto start = std::chrono::steady_clock::now();
  queue.wait_while_idle(start + 60s, stop);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(TensorQueue, IdleWaitEndsAtItsDeadline) {
  te::TensorQueue queue;
  std::atomic<bool> stop{false};
  queue.submit(op("a", 1));
  queue.finish(key("a"));  // nothing in flight any more
  const auto start = std::chrono::steady_clock::now();
  queue.wait_while_idle(start + 50ms, stop);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
}

TEST(TensorQueue, IdleWaitIsWokenByASubmission) {
  te::TensorQueue queue;
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread submitter([&] {
    std::this_thread::sleep_for(20ms);
    queue.submit(op("a", 1));
  });
  queue.wait_while_idle(start + 60s, stop);
  submitter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(names(queue.take_new()), Names{"a"});
}

TEST(TensorQueue, IdleWaitIsWokenByAStop) {
  te::TensorQueue queue;
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);
    stop = true;
    queue.wake();
  });
  queue.wait_while_idle(start + 60s, stop);
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(TensorQueue, FlushEndsTheWaitForTheNextCycleUntilTheNextTake) {
  te::TensorQueue queue;
  std::atomic<bool> stop{false};
  queue.submit(op("a", 1));
  queue.flush();
  auto start = std::chrono::steady_clock::now();
  queue.wait_for_cycle(start + 60s, stop);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(names(queue.take_new()), Names{"a"});
  // The cycle took what was flushed: the next wait runs to its deadline.
  start = std::chrono::steady_clock::now();
  queue.wait_for_cycle(start + 50ms, stop);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
}

TEST(TensorQueue, FlushFromAnotherThreadWakesTheWaitForTheNextCycle) {
  te::TensorQueue queue;
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  std::thread flusher([&] {
    std::this_thread::sleep_for(20ms);
    queue.flush();
  });
  queue.wait_for_cycle(start + 60s, stop);
  flusher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// --- HandleTable ----------------------------------------------------------------------------

TEST(HandleTable, CreateGivesDistinctPendingHandles) {
  te::HandleTable table;
  const te::Handle a = table.create();
  const te::Handle b = table.create();
  EXPECT_GT(a, 0);
  EXPECT_GT(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(table.poll(a), 0);
  EXPECT_EQ(table.poll(b), 0);
  EXPECT_EQ(table.pending(), 2u);
  EXPECT_EQ(table.result(a), nullptr);  // no result while pending
  ASSERT_NE(table.error(a), nullptr);
  EXPECT_EQ(*table.error(a), "");
}

TEST(HandleTable, CompleteFinishesWithCodeMessageAndResult) {
  te::HandleTable table;
  const te::Handle ok = table.create();
  const te::Handle failed = table.create();
  te::OpResult result;
  result.data = {std::byte{1}, std::byte{2}, std::byte{3}};
  result.dtype = te::ElementType::kInt8;
  result.shape = {3};
  result.received_splits = {1, 2};
  result.last_joined_rank = 4;
  table.complete(ok, THREELC_OK, "", result);
  table.complete(failed, THREELC_EMISMATCH, "ranks disagree");
  EXPECT_EQ(table.pending(), 0u);
  EXPECT_EQ(table.poll(ok), 1);
  EXPECT_EQ(table.poll(failed), 1);
  EXPECT_EQ(table.wait(ok, std::nullopt), THREELC_OK);
  EXPECT_EQ(table.wait(ok, 0ms), THREELC_OK);
  EXPECT_EQ(table.wait(failed, 10ms), THREELC_EMISMATCH);
  ASSERT_NE(table.error(failed), nullptr);
  EXPECT_EQ(*table.error(failed), "ranks disagree");
  const te::OpResult* r = table.result(ok);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->data, result.data);
  EXPECT_EQ(r->dtype, te::ElementType::kInt8);
  EXPECT_EQ(r->shape, std::vector<int64_t>{3});
  EXPECT_EQ(r->received_splits, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r->last_joined_rank, 4);
  // A second completion changes nothing.
  table.complete(failed, THREELC_OK, "later");
  EXPECT_EQ(table.wait(failed, std::nullopt), THREELC_EMISMATCH);
  EXPECT_EQ(*table.error(failed), "ranks disagree");
  // Completing an unknown handle does nothing.
  EXPECT_NO_THROW(table.complete(12345, THREELC_OK, ""));
  EXPECT_EQ(table.poll(12345), THREELC_EINVAL);
}

TEST(HandleTable, WaitTimesOutOnAPendingHandle) {
  te::HandleTable table;
  const te::Handle h = table.create();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(table.wait(h, 30ms), THREELC_ETIMEOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  EXPECT_EQ(table.wait(h, 0ms), THREELC_ETIMEOUT);
  EXPECT_EQ(table.poll(h), 0);  // still pending
  table.complete(h, THREELC_ESHUTDOWN, "shut down");
  EXPECT_EQ(table.wait(h, 0ms), THREELC_ESHUTDOWN);
}

TEST(HandleTable, WaitIsWokenByAnotherThreadsComplete) {
  te::HandleTable table;
  const te::Handle h = table.create();
  const te::Handle other = table.create();
  const auto start = std::chrono::steady_clock::now();  // before the completer's sleeps begin
  std::thread completer([&] {
    std::this_thread::sleep_for(20ms);
    table.complete(other, THREELC_OK, "");  // another handle's completion does not end the wait
    std::this_thread::sleep_for(30ms);
    table.complete(h, THREELC_EPEER, "peer 3 closed");
  });
  const int code = table.wait(h, std::nullopt);
  const auto waited = std::chrono::steady_clock::now() - start;
  completer.join();
  EXPECT_EQ(code, THREELC_EPEER);
  EXPECT_GE(waited, 50ms);
  EXPECT_EQ(*table.error(h), "peer 3 closed");

  // With a generous timeout the wait still returns as soon as the handle completes.
  const te::Handle h2 = table.create();
  std::thread completer2([&] {
    std::this_thread::sleep_for(20ms);
    table.complete(h2, THREELC_OK, "");
  });
  const auto start2 = std::chrono::steady_clock::now();
  EXPECT_EQ(table.wait(h2, 20s), THREELC_OK);
  EXPECT_LT(std::chrono::steady_clock::now() - start2, 10s);
  completer2.join();
}

// What each rank tells the coordinator's deadlock detection: a thread inside a long enough
// wait, or just out of one that timed out (the Python binding waits in slices), is blocked; a
// poll-like wait is not.
TEST(HandleTable, BlockedWhileAThreadWaitsLongEnough) {
  te::HandleTable table;
  const te::Handle h = table.create();
  EXPECT_FALSE(table.blocked(std::chrono::steady_clock::now()));
  EXPECT_EQ(table.wait(h, 1ms), THREELC_ETIMEOUT);  // shorter than kBlockingWait
  EXPECT_FALSE(table.blocked(std::chrono::steady_clock::now()));
  std::atomic<bool> seen{false};
  std::thread waiter([&] { EXPECT_EQ(table.wait(h, std::nullopt), THREELC_OK); });
  for (int i = 0; i < 2000 && !seen; ++i) {
    seen = table.blocked(std::chrono::steady_clock::now());
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(seen);
  table.complete(h, THREELC_OK, "");
  waiter.join();
  // Woken by its completion: no longer blocked.
  EXPECT_FALSE(table.blocked(std::chrono::steady_clock::now()));
  const te::Handle h2 = table.create();
  EXPECT_EQ(table.wait(h2, te::HandleTable::kBlockingWait), THREELC_ETIMEOUT);
  const auto after = std::chrono::steady_clock::now();
  EXPECT_TRUE(table.blocked(after));  // between two slices of a longer wait
  EXPECT_FALSE(table.blocked(after + te::HandleTable::kBlockingGrace));
}

TEST(HandleTable, ManyWaitersAreAllWoken) {
  te::HandleTable table;
  const te::Handle h = table.create();
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  waiters.reserve(4);
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&] {
      // Woken by the completion, not by the timeout.
      const auto start = std::chrono::steady_clock::now();
      if (table.wait(h, 20s) == THREELC_OK && std::chrono::steady_clock::now() - start < 10s) {
        ++woken;
      }
    });
  }
  std::this_thread::sleep_for(20ms);
  table.complete(h, THREELC_OK, "");
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woken.load(), 4);
}

// `h` is not (or no longer) in `table`: every call on it is THREELC_EINVAL or nullptr.
void expect_unknown(te::HandleTable& table, te::Handle h) {
  EXPECT_EQ(table.poll(h), THREELC_EINVAL);
  EXPECT_EQ(table.wait(h, std::nullopt), THREELC_EINVAL);
  EXPECT_EQ(table.wait(h, 5ms), THREELC_EINVAL);
  EXPECT_EQ(table.error(h), nullptr);
  EXPECT_EQ(table.result(h), nullptr);
  EXPECT_EQ(table.release(h), THREELC_EINVAL);
}

TEST(HandleTable, ReleaseForgetsTheHandle) {
  te::HandleTable table;
  const te::Handle h = table.create();
  table.complete(h, THREELC_OK, "");
  EXPECT_EQ(table.release(h), THREELC_OK);
  expect_unknown(table, h);
  // Handles are not reused.
  EXPECT_NE(table.create(), h);
  // A pending handle can be released too (it no longer counts as pending).
  const te::Handle pending = table.create();
  EXPECT_EQ(table.pending(), 2u);
  EXPECT_EQ(table.release(pending), THREELC_OK);
  EXPECT_EQ(table.pending(), 1u);
  EXPECT_NO_THROW(table.complete(pending, THREELC_OK, ""));
}

TEST(HandleTable, UnknownHandlesAreInvalid) {
  te::HandleTable table;
  for (te::Handle h : {te::Handle{0}, te::Handle{-1}, te::Handle{1}, te::Handle{1} << 40}) {
    SCOPED_TRACE(h);
    expect_unknown(table, h);
  }
}

}  // namespace
