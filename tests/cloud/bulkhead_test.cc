#include "cloud/bulkhead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "obs/metrics.h"

namespace hengshi::cloud {
namespace {

using namespace std::chrono_literals;
using Strand = asio::strand<asio::io_context::executor_type>;

BulkheadConfig limits(int max_concurrent, int max_queue, std::int64_t max_queue_wait_ms = 5000) {
  BulkheadConfig config;
  config.max_concurrent = max_concurrent;
  config.max_queue = max_queue;
  config.max_queue_wait_ms = max_queue_wait_ms;
  return config;
}

// One caller: acquires on its own strand and keeps the permit (or the error) for the test.
struct Caller {
  explicit Caller(asio::io_context& ioc) : strand(asio::make_strand(ioc)) {}
  Strand strand;
  CancelToken cancel;
  std::optional<Bulkhead::Permit> permit;
  std::optional<UpstreamError> error;
  bool done() const { return permit.has_value() || error.has_value(); }
};

class BulkheadTest : public ::testing::Test {
 protected:
  Bulkhead& make(BulkheadConfig config) {
    bulkhead_ = std::make_unique<Bulkhead>("cloud-large", config, registry_);
    return *bulkhead_;
  }

  Caller& caller() { return *callers_.emplace_back(std::make_unique<Caller>(ioc_)); }

  // Starts an acquire() on the caller's strand and runs whatever is ready (no blocking).
  void start(Caller& c, Deadline deadline = Deadline::never()) {
    asio::co_spawn(
        c.strand,
        [this, &c, deadline]() -> awaitable<void> {
          auto result = co_await bulkhead_->acquire(deadline, c.cancel);
          if (result) {
            c.permit.emplace(std::move(result).value());
          } else {
            c.error = result.error();
          }
        },
        asio::detached);
    poll();
  }
  void poll() {
    ioc_.restart();
    ioc_.poll();
  }
  // Runs until every started caller finished (timers included).
  void run() {
    ioc_.restart();
    ioc_.run();
  }
  // Drops the caller's permit on its own strand, as a finished call would.
  void release(Caller& c) {
    asio::post(c.strand, [&c] { c.permit.reset(); });
    poll();
  }

  double metric(const char* name) {
    return registry_.gauge(name, "", {{"pool", "cloud-large"}}).value();
  }
  double rejected_total() {
    return registry_.counter("hengshi_bulkhead_rejected_total", "", {{"pool", "cloud-large"}})
        .value();
  }

  asio::io_context ioc_;
  obs::Registry registry_;
  std::unique_ptr<Bulkhead> bulkhead_;
  std::vector<std::unique_ptr<Caller>> callers_;
};

TEST_F(BulkheadTest, HoldsTheLimitAndServesTheQueueInOrder) {
  auto& bulkhead = make(limits(2, 3));
  std::vector<Caller*> callers;
  for (int i = 0; i < 5; ++i) {
    callers.push_back(&caller());
    start(*callers.back());
  }
  EXPECT_TRUE(callers[0]->permit && callers[1]->permit);
  for (int i = 2; i < 5; ++i) EXPECT_FALSE(callers[i]->done()) << i;
  EXPECT_EQ(bulkhead.in_use(), 2);
  EXPECT_EQ(bulkhead.queued(), 3);
  EXPECT_EQ(metric("hengshi_bulkhead_in_use"), 2.0);
  EXPECT_EQ(metric("hengshi_bulkhead_queued"), 3.0);

  // Each release admits exactly the oldest waiter; the limit is never exceeded.
  release(*callers[1]);
  EXPECT_TRUE(callers[2]->permit.has_value());
  EXPECT_FALSE(callers[3]->done());
  EXPECT_EQ(bulkhead.in_use(), 2);
  release(*callers[0]);
  EXPECT_TRUE(callers[3]->permit.has_value());
  EXPECT_FALSE(callers[4]->done());
  release(*callers[3]);
  EXPECT_TRUE(callers[4]->permit.has_value());
  EXPECT_EQ(bulkhead.queued(), 0);
  EXPECT_EQ(bulkhead.in_use(), 2);

  release(*callers[2]);
  release(*callers[4]);
  EXPECT_EQ(bulkhead.in_use(), 0);
  EXPECT_EQ(metric("hengshi_bulkhead_in_use"), 0.0);
  EXPECT_EQ(rejected_total(), 0.0);
}

// The pool's fast path: a permit without a coroutine only while one is free and nobody waits,
// so it never jumps the queue; the permits count against the same limit as acquire()'s.
TEST_F(BulkheadTest, TryAcquireTakesAFreePermitButNeverJumpsTheQueue) {
  auto& bulkhead = make(limits(2, 3));
  Bulkhead::Permit first = bulkhead.try_acquire();
  EXPECT_TRUE(first.held());
  EXPECT_EQ(bulkhead.in_use(), 1);
  EXPECT_EQ(metric("hengshi_bulkhead_in_use"), 1.0);
  auto& second = caller();
  start(second);
  ASSERT_TRUE(second.permit.has_value());
  EXPECT_FALSE(bulkhead.try_acquire().held()) << "both permits are held";
  auto& waiting = caller();
  start(waiting);
  EXPECT_FALSE(waiting.done());
  EXPECT_EQ(bulkhead.queued(), 1);

  first.reset();  // the freed permit goes to the waiter, not to a try_acquire() after it
  poll();
  EXPECT_TRUE(waiting.permit.has_value());
  EXPECT_FALSE(bulkhead.try_acquire().held());
  release(second);
  Bulkhead::Permit again = bulkhead.try_acquire();
  EXPECT_TRUE(again.held());
  EXPECT_EQ(bulkhead.in_use(), 2);
  again.reset();
  release(waiting);
  EXPECT_EQ(bulkhead.in_use(), 0);
  EXPECT_EQ(metric("hengshi_bulkhead_in_use"), 0.0);
}

TEST_F(BulkheadTest, FullQueueFailsAtOnceAsOverloaded) {
  auto& bulkhead = make(limits(1, 1));
  Caller& holder = caller();
  Caller& waiter = caller();
  Caller& refused = caller();
  start(holder);
  start(waiter);
  const auto before = Clock::now();
  start(refused);  // poll() only: it must finish without any timer
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_LT(Clock::now() - before, 1s);
  EXPECT_EQ(refused.error->kind, UpstreamErrorKind::overloaded);
  EXPECT_EQ(refused.error->retry_after_ms, 1000);
  EXPECT_TRUE(refused.error->retryable());
  EXPECT_NE(refused.error->message.find("cloud-large"), std::string::npos)
      << refused.error->message;
  EXPECT_NE(refused.error->message.find("bulkhead"), std::string::npos) << refused.error->message;
  EXPECT_EQ(rejected_total(), 1.0);
  EXPECT_EQ(bulkhead.queued(), 1);
  release(holder);
  EXPECT_TRUE(waiter.permit.has_value());
}

TEST_F(BulkheadTest, NoQueueMeansNoWait) {
  make(limits(1, 0));
  Caller& holder = caller();
  Caller& refused = caller();
  start(holder);
  start(refused);
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->kind, UpstreamErrorKind::overloaded);
}

TEST_F(BulkheadTest, WaitEndsAfterMaxQueueWaitMs) {
  auto& bulkhead = make(limits(1, 4, 50));
  Caller& holder = caller();
  Caller& waiter = caller();
  start(holder);
  const auto before = Clock::now();
  start(waiter);
  run();  // until the waiter's timer fires: the holder never releases
  const auto waited = Clock::now() - before;
  ASSERT_TRUE(waiter.error.has_value());
  EXPECT_EQ(waiter.error->kind, UpstreamErrorKind::overloaded);
  EXPECT_EQ(waiter.error->retry_after_ms, 1000);
  EXPECT_NE(waiter.error->message.find("bulkhead"), std::string::npos);
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 2s);
  EXPECT_EQ(bulkhead.queued(), 0);  // the slot is free again
  EXPECT_EQ(rejected_total(), 1.0);
}

TEST_F(BulkheadTest, WaitEndsAtTheCallsDeadline) {
  make(limits(1, 4, 60'000));
  Caller& holder = caller();
  Caller& waiter = caller();
  start(holder);
  const auto before = Clock::now();
  start(waiter, Deadline::after(30ms));
  run();
  const auto waited = Clock::now() - before;
  ASSERT_TRUE(waiter.error.has_value());
  EXPECT_EQ(waiter.error->kind, UpstreamErrorKind::overloaded);
  EXPECT_GE(waited, 30ms);
  EXPECT_LT(waited, 5s);  // nowhere near max_queue_wait_ms
}

TEST_F(BulkheadTest, ASpentDeadlineFailsAtOnce) {
  make(limits(1, 4, 60'000));
  Caller& holder = caller();
  Caller& late = caller();
  start(holder);
  start(late, Deadline(Clock::now() - 1ms));
  ASSERT_TRUE(late.error.has_value());
  EXPECT_EQ(late.error->kind, UpstreamErrorKind::overloaded);
}

TEST_F(BulkheadTest, CancellationEndsTheWaitAndFreesTheQueueSlot) {
  auto& bulkhead = make(limits(1, 1));
  Caller& holder = caller();
  Caller& waiter = caller();
  start(holder);
  start(waiter);
  ASSERT_EQ(bulkhead.queued(), 1);
  asio::post(waiter.strand, [&] { waiter.cancel.cancel(); });  // on the token's strand
  poll();
  ASSERT_TRUE(waiter.error.has_value());
  EXPECT_EQ(waiter.error->kind, UpstreamErrorKind::cancelled);
  EXPECT_EQ(bulkhead.queued(), 0);
  EXPECT_EQ(rejected_total(), 0.0);  // a caller that left was not refused
  // The slot is usable again, and the next release goes to the new waiter.
  Caller& next = caller();
  start(next);
  EXPECT_FALSE(next.done());
  release(holder);
  EXPECT_TRUE(next.permit.has_value());
  EXPECT_EQ(bulkhead.in_use(), 1);
}

TEST_F(BulkheadTest, AlreadyCancelledTokenIsNotAdmitted) {
  auto& bulkhead = make(limits(4, 4));
  Caller& gone = caller();
  gone.cancel.cancel();
  start(gone);
  ASSERT_TRUE(gone.error.has_value());
  EXPECT_EQ(gone.error->kind, UpstreamErrorKind::cancelled);
  EXPECT_EQ(bulkhead.in_use(), 0);
}

TEST_F(BulkheadTest, PermitIsReleasedWhenTheCallThrows) {
  auto& bulkhead = make(limits(1, 1));
  bool threw = false;
  auto strand = asio::make_strand(ioc_);
  asio::co_spawn(
      strand,
      [this]() -> awaitable<void> {
        auto permit = co_await bulkhead_->acquire(Deadline::never(), CancelToken{});
        EXPECT_TRUE(permit.ok());
        throw std::runtime_error("the call failed mid-way");
      },
      [&threw](std::exception_ptr failure) { threw = failure != nullptr; });
  poll();
  EXPECT_TRUE(threw);
  EXPECT_EQ(bulkhead.in_use(), 0);
  EXPECT_EQ(metric("hengshi_bulkhead_in_use"), 0.0);
}

TEST_F(BulkheadTest, PermitMovesAndResets) {
  auto& bulkhead = make(limits(2, 0));
  Caller& a = caller();
  start(a);
  ASSERT_TRUE(a.permit.has_value());
  Bulkhead::Permit moved = std::move(*a.permit);
  EXPECT_FALSE(a.permit->held());
  EXPECT_TRUE(moved.held());
  a.permit.reset();  // the moved-from permit releases nothing
  EXPECT_EQ(bulkhead.in_use(), 1);
  moved.reset();
  EXPECT_FALSE(moved.held());
  EXPECT_EQ(bulkhead.in_use(), 0);
}

TEST_F(BulkheadTest, GrantToACallerThatLeftPassesToTheNext) {
  auto& bulkhead = make(limits(1, 2));
  Caller& holder = caller();
  Caller& leaving = caller();
  Caller& staying = caller();
  start(holder);
  start(leaving);
  start(staying);
  // The holder releases (the grant to `leaving` is posted to its strand) and `leaving` is cancelled
  // before that wake-up runs: its permit must pass on, not leak.
  asio::post(leaving.strand, [&] { leaving.cancel.cancel(); });
  holder.permit.reset();
  poll();
  ASSERT_TRUE(leaving.error.has_value());
  EXPECT_EQ(leaving.error->kind, UpstreamErrorKind::cancelled);
  EXPECT_TRUE(staying.permit.has_value());
  EXPECT_EQ(bulkhead.in_use(), 1);
  EXPECT_EQ(bulkhead.queued(), 0);
}

// Many callers on many strands and threads: never more than max_concurrent at once, and every
// caller is served (the queue is long enough and the wait generous).
TEST_F(BulkheadTest, HoldsTheLimitAcrossThreads) {
  constexpr int kCallers = 64;
  constexpr int kLimit = 3;
  auto& bulkhead = make(limits(kLimit, kCallers, 30'000));
  std::atomic<int> active{0};
  std::atomic<int> most{0};
  std::atomic<int> served{0};
  for (int i = 0; i < kCallers; ++i) {
    auto strand = asio::make_strand(ioc_);
    asio::co_spawn(
        strand,
        [&]() -> awaitable<void> {
          auto permit = co_await bulkhead_->acquire(Deadline::after(30s), CancelToken{});
          if (!permit) co_return;
          int now = ++active;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          // Holds the permit across a suspension, as a real upstream call does.
          asio::steady_timer work(co_await asio::this_coro::executor, 1ms);
          co_await work.async_wait(use_awaitable);
          --active;
          ++served;
        },
        asio::detached);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([this] { ioc_.run(); });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(served.load(), kCallers);
  EXPECT_LE(most.load(), kLimit);
  EXPECT_EQ(most.load(), kLimit);  // the limit was reached, so it was really tested
  EXPECT_EQ(bulkhead.in_use(), 0);
  EXPECT_EQ(bulkhead.queued(), 0);
}

}  // namespace
}  // namespace hengshi::cloud
