#include "core/budget.h"

#include <gtest/gtest.h>

namespace hengshi {
namespace {

using std::chrono::milliseconds;

TEST(Budget, EachLevelGetsItsShareOfWhatRemainsWhenItStarts) {
  const auto now = Clock::now();
  Budget budget(Deadline(now + milliseconds(10'000)), LevelShares{});
  EXPECT_EQ(budget.for_level(Level::edge, false, now).at(), now + milliseconds(7'000));
  EXPECT_EQ(budget.for_level(Level::edge_degraded, false, now).at(), now + milliseconds(3'000));
  EXPECT_EQ(budget.for_level(Level::cloud_small, false, now).at(), now + milliseconds(5'000));
  EXPECT_EQ(budget.for_level(Level::cloud_large, false, now).at(), now + milliseconds(8'000));
  // Later, with 4 s left: the share is of the remaining 4 s.
  const auto later = now + milliseconds(6'000);
  EXPECT_EQ(budget.for_level(Level::cloud_small, false, later).at(), later + milliseconds(2'000));
}

TEST(Budget, TheLastLevelBeforeTheResortKeepsOnlyTheReserveBack) {
  const auto now = Clock::now();
  Budget budget(Deadline(now + milliseconds(1'000)), LevelShares{});
  EXPECT_EQ(budget.for_level(Level::cloud_large, true, now).at(), now + milliseconds(950));
  EXPECT_EQ(budget.for_level(Level::last_resort, false, now).at(), now + milliseconds(1'000));
  // Never past the request's deadline, and never negative.
  const auto past = now + milliseconds(2'000);
  EXPECT_LE(budget.for_level(Level::edge, true, past).at(), budget.deadline().at());
  EXPECT_EQ(budget.remaining(past).count(), 0);
  EXPECT_TRUE(budget.spent(past));
}

TEST(Budget, SharesAreConfigurable) {
  const auto now = Clock::now();
  LevelShares shares;
  shares.edge = 0.2;
  shares.last_resort_ms = 200;
  Budget budget(Deadline(now + milliseconds(1'000)), shares);
  EXPECT_EQ(budget.for_level(Level::edge, false, now).at(), now + milliseconds(200));
  EXPECT_EQ(budget.for_level(Level::cloud_small, true, now).at(), now + milliseconds(800));
}

TEST(Budget, RemainingRoundsUpSoAFreshBudgetReadsWhole) {
  // Read against a fixed `now`: a wall-clock read would fail whenever a millisecond passed
  // between building and reading (it did under the sanitizers).
  const auto now = std::chrono::steady_clock::now();
  const Budget budget(Deadline(now + milliseconds(1234)), {});
  EXPECT_EQ(budget.remaining(now).count(), 1234);
  EXPECT_EQ(budget.remaining(now + std::chrono::microseconds(1)).count(), 1234);
  EXPECT_EQ(budget.remaining(now + milliseconds(1234)).count(), 0);
  EXPECT_FALSE(Budget().spent());
}

}  // namespace
}  // namespace hengshi
