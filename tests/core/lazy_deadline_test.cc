#include "core/lazy_deadline.h"

#include <gtest/gtest.h>

namespace hengshi {
namespace {

using namespace std::chrono_literals;

// The io_context runs until the deadline's timer has nothing left to do, bounded by `most`. It
// returns the time since `start`, which each test reads before it sets any limit or timer: read
// later, a limit set before it would seem to fire a few microseconds early.
Clock::duration run(asio::io_context& io, Clock::time_point start, Clock::duration most = 10s) {
  io.run_for(most);
  return Clock::now() - start;
}

TEST(LazyDeadlineTest, RunsOnExpireOnceWhenTheLimitPasses) {
  asio::io_context io;
  int fired = 0;
  LazyDeadline deadline(io.get_executor(), 10ms, [&] { ++fired; });
  const auto start = Clock::now();
  deadline.expires_after(50ms);
  // The timer wakes every 10 ms until the limit, then stops: run() returns once it has.
  const auto took = run(io, start);
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(deadline.expired());
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 5s);
  deadline.expires_after(1ms);  // nothing after expiry
  io.restart();
  run(io, Clock::now(), 50ms);
  EXPECT_EQ(fired, 1);
}

TEST(LazyDeadlineTest, ALimitMovedLaterIsKeptWithoutFiringAtTheOldOne) {
  asio::io_context io;
  int fired = 0;
  Clock::time_point fired_at;
  LazyDeadline deadline(io.get_executor(), 10ms, [&] {
    ++fired;
    fired_at = Clock::now();
  });
  const auto start = Clock::now();
  deadline.expires_after(40ms);
  // Before the first limit, the owner moves it to 120 ms (as a request on a keep-alive connection
  // does with the idle limit).
  asio::steady_timer mover(io, 20ms);
  mover.async_wait([&](const boost::system::error_code&) { deadline.expires_at(start + 120ms); });
  run(io, start);
  EXPECT_EQ(fired, 1);
  EXPECT_GE(fired_at - start, 120ms);
}

TEST(LazyDeadlineTest, WithoutAPeriodTheTimerStopsWhileThereIsNoLimit) {
  asio::io_context io;
  const auto start = Clock::now();
  int fired = 0;
  LazyDeadline deadline(io.get_executor(), LazyDeadline::kNoPeriod, [&] { ++fired; });
  deadline.expires_after(20ms);
  deadline.expires_never();
  // The timer wakes at 20 ms, finds no limit and stops: the io_context runs out of work.
  const auto took = run(io, start);
  EXPECT_EQ(fired, 0);
  EXPECT_GE(took, 20ms);
  EXPECT_LT(took, 5s);
}

TEST(LazyDeadlineTest, ALimitSoonerThanTheWakeUpRearmsAtOnce) {
  asio::io_context io;
  const auto start = Clock::now();
  int fired = 0;
  LazyDeadline deadline(io.get_executor(), LazyDeadline::kNoPeriod, [&] { ++fired; });
  deadline.expires_after(60s);  // the timer sleeps toward this
  asio::steady_timer sooner(io, 30ms);
  sooner.async_wait([&](const boost::system::error_code&) { deadline.expires_after(20ms); });
  const auto took = run(io, start);
  EXPECT_EQ(fired, 1);
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 5s);  // not the 60 s wake-up
}

TEST(LazyDeadlineTest, ClearedLimitDoesNotFire) {
  asio::io_context io;
  const auto start = Clock::now();
  int fired = 0;
  auto deadline = std::make_unique<LazyDeadline>(io.get_executor(), 10ms, [&] { ++fired; });
  deadline->expires_after(30ms);
  deadline->expires_never();
  // With a period the timer keeps waking while there is no limit; the owner going away stops it.
  asio::steady_timer owner_leaves(io, 100ms);
  owner_leaves.async_wait([&](const boost::system::error_code&) { deadline.reset(); });
  const auto took = run(io, start);
  EXPECT_EQ(fired, 0);
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 5s);
}

}  // namespace
}  // namespace hengshi
