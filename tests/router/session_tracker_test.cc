#include "router/session_tracker.h"

#include <gtest/gtest.h>

#include <thread>

namespace hengshi::router {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
const auto kStart = std::chrono::steady_clock::time_point(std::chrono::hours(1000));

TEST(SessionTrackerTest, UnknownSessionIsNotKnown) {
  const SessionTracker tracker;
  const SessionView view = tracker.view("nobody", kStart);
  EXPECT_FALSE(view.known);
  EXPECT_EQ(view.turns, 0);
  EXPECT_TRUE(view.recent_complexity.empty());
  EXPECT_EQ(mean_complexity(view), 0.0);
}

TEST(SessionTrackerTest, KeepsTheLastWindowOfComplexities) {
  SessionTracker tracker(100, minutes(30), 3);
  tracker.record("s1", 1, "edge", kStart);
  tracker.record("s1", 2, "edge", kStart + seconds(1));
  EXPECT_EQ(tracker.view("s1", kStart + seconds(1)).recent_complexity, (std::vector<int>{1, 2}));
  tracker.record("s1", 3, "cloud-small", kStart + seconds(2));
  tracker.record("s1", 6, "cloud-large", kStart + seconds(3));
  const SessionView view = tracker.view("s1", kStart + seconds(4));
  EXPECT_TRUE(view.known);
  EXPECT_EQ(view.recent_complexity, (std::vector<int>{2, 3, 6}));
  EXPECT_DOUBLE_EQ(mean_complexity(view), 11.0 / 3.0);
  EXPECT_EQ(view.turns, 4);
  EXPECT_EQ(view.last_route, "cloud-large");
}

TEST(SessionTrackerTest, CountsCloudCalls) {
  SessionTracker tracker;
  tracker.record("s", 1, "edge", kStart);
  tracker.record("s", 1, "cloud-small", kStart);
  tracker.record("s", 1, "cloud-large", kStart);
  tracker.record("s", 1, "human", kStart);
  tracker.record("s", 1, "refuse", kStart);
  const SessionView view = tracker.view("s", kStart);
  EXPECT_EQ(view.turns, 5);
  EXPECT_EQ(view.cloud_calls, 2);
  EXPECT_EQ(view.last_route, "refuse");
}

TEST(SessionTrackerTest, EvictsTheLeastRecentlyRecordedSession) {
  SessionTracker tracker(3, minutes(30), 3, /*shards=*/1);
  tracker.record("a", 1, "edge", kStart);
  tracker.record("b", 1, "edge", kStart + seconds(1));
  tracker.record("c", 1, "edge", kStart + seconds(2));
  tracker.record("a", 2, "edge", kStart + seconds(3));  // a is now the most recent
  tracker.record("d", 1, "edge", kStart + seconds(4));  // evicts b
  const auto now = kStart + seconds(5);
  EXPECT_EQ(tracker.size(), 3u);
  EXPECT_TRUE(tracker.view("a", now).known);
  EXPECT_FALSE(tracker.view("b", now).known);
  EXPECT_TRUE(tracker.view("c", now).known);
  EXPECT_TRUE(tracker.view("d", now).known);
  EXPECT_EQ(tracker.view("a", now).turns, 2);
}

TEST(SessionTrackerTest, ShardedTrackerStaysWithinItsBound) {
  SessionTracker tracker(64, minutes(30), 3);  // 16 shards of 4
  for (int i = 0; i < 1000; ++i) tracker.record("s" + std::to_string(i), 1, "edge", kStart);
  EXPECT_LE(tracker.size(), 64u);
  EXPECT_GT(tracker.size(), 32u);                   // a hash spread this uneven would mean a bug
  EXPECT_TRUE(tracker.view("s999", kStart).known);  // the newest is always kept

  SessionTracker tiny(2, minutes(30), 3);  // fewer sessions than shards
  for (int i = 0; i < 10; ++i) tiny.record("s" + std::to_string(i), 1, "edge", kStart);
  EXPECT_LE(tiny.size(), 2u);
}

TEST(SessionTrackerTest, ExpiresAfterTheTtl) {
  SessionTracker tracker(100, seconds(60), 3, 1);
  tracker.record("s", 5, "cloud-large", kStart);
  EXPECT_TRUE(tracker.view("s", kStart + seconds(59)).known);
  EXPECT_FALSE(tracker.view("s", kStart + seconds(60)).known);
  EXPECT_EQ(tracker.size(), 0u);  // dropped when seen expired

  // A record after expiry starts the session over.
  tracker.record("t", 5, "cloud-large", kStart);
  tracker.record("t", 1, "edge", kStart + seconds(61));
  const SessionView view = tracker.view("t", kStart + seconds(61));
  EXPECT_EQ(view.turns, 1);
  EXPECT_EQ(view.cloud_calls, 0);
  EXPECT_EQ(view.recent_complexity, (std::vector<int>{1}));

  // Recording refreshes the ttl; viewing does not.
  tracker.record("u", 1, "edge", kStart);
  tracker.record("u", 1, "edge", kStart + seconds(50));
  EXPECT_TRUE(tracker.view("u", kStart + seconds(100)).known);
  EXPECT_FALSE(tracker.view("u", kStart + seconds(110)).known);
}

TEST(SessionTrackerTest, ExpiredEntriesAreDroppedLazilyOnRecord) {
  SessionTracker tracker(100, seconds(60), 3, 1);
  for (int i = 0; i < 10; ++i) tracker.record("old" + std::to_string(i), 1, "edge", kStart);
  EXPECT_EQ(tracker.size(), 10u);
  tracker.record("new", 1, "edge", kStart + seconds(120));
  EXPECT_EQ(tracker.size(), 1u);
}

TEST(SessionTrackerTest, EmptySessionIdIsNotRemembered) {
  SessionTracker tracker;
  tracker.record("", 3, "edge", kStart);
  EXPECT_EQ(tracker.size(), 0u);
  EXPECT_FALSE(tracker.view("", kStart).known);
}

TEST(SessionTrackerTest, ConcurrentRecordsFromFourThreads) {
  SessionTracker tracker(1000, minutes(30), 3);
  constexpr int kThreads = 4;
  constexpr int kTurns = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&tracker, t] {
      for (int i = 0; i < kTurns; ++i) {
        const auto now = kStart + std::chrono::milliseconds(i);
        tracker.record("shared", i % 5, i % 2 == 0 ? "cloud-small" : "edge", now);
        tracker.record("own" + std::to_string(t), 1, "edge", now);
        (void)tracker.view("shared", now);
        (void)tracker.size();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto now = kStart + std::chrono::milliseconds(kTurns);
  const SessionView shared = tracker.view("shared", now);
  EXPECT_EQ(shared.turns, kThreads * kTurns);
  EXPECT_EQ(shared.cloud_calls, kThreads * kTurns / 2);
  EXPECT_EQ(shared.recent_complexity.size(), 3u);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(tracker.view("own" + std::to_string(t), now).turns, kTurns);
  }
  EXPECT_EQ(tracker.size(), 5u);
}

}  // namespace
}  // namespace hengshi::router
