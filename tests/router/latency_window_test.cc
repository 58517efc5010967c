#include "router/latency_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

namespace hengshi::router {
namespace {

using std::chrono::seconds;
const auto kStart = std::chrono::steady_clock::time_point(std::chrono::hours(1000));

double exact_quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const auto rank =
      std::min(static_cast<std::size_t>(std::floor(q * values.size())), values.size() - 1);
  return values[rank];
}

TEST(SlidingQuantileTest, EmptyWindowHasNoQuantile) {
  const SlidingQuantile window;
  EXPECT_EQ(window.quantile(0.9, kStart), std::nullopt);
  EXPECT_EQ(window.count(kStart), 0u);
}

TEST(SlidingQuantileTest, MatchesAnExactSortWithinFivePercent) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> latency_ms(std::log(400.0), 0.8);  // a long tail
  SlidingQuantile window;
  std::vector<double> values;
  for (int i = 0; i < 20000; ++i) {
    const double value = latency_ms(rng);
    values.push_back(value);
    // Spread over the whole window (300 s), so every slot takes part.
    window.observe(value, kStart + std::chrono::milliseconds(i * 14));
  }
  const auto now = kStart + seconds(285);
  ASSERT_EQ(window.count(now), values.size());
  for (double q : {0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    const double exact = exact_quantile(values, q);
    const auto estimate = window.quantile(q, now);
    ASSERT_TRUE(estimate.has_value());
    EXPECT_LE(std::abs(*estimate - exact) / exact, 0.05)
        << "q=" << q << " exact=" << exact << " estimate=" << *estimate;
  }
}

TEST(SlidingQuantileTest, AccurateAcrossTheRange) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-1.0, 5.7);  // 0.1 ms .. 500 s
  for (int round = 0; round < 20; ++round) {
    SlidingQuantile window;
    std::vector<double> values;
    for (int i = 0; i < 500; ++i) {
      values.push_back(std::pow(10.0, exponent(rng)));
      window.observe(values.back(), kStart);
    }
    for (double q : {0.25, 0.5, 0.9}) {
      const double exact = exact_quantile(values, q);
      EXPECT_LE(std::abs(*window.quantile(q, kStart) - exact) / exact, 0.05) << q;
    }
  }
}

TEST(SlidingQuantileTest, SingleValueAndClampedValues) {
  SlidingQuantile window;
  window.observe(250.0, kStart);
  EXPECT_NEAR(*window.quantile(0.9, kStart), 250.0, 250.0 * 0.05);
  window.observe(-3, kStart);   // ignored
  window.observe(NAN, kStart);  // ignored
  EXPECT_EQ(window.count(kStart), 1u);
  SlidingQuantile extremes;
  extremes.observe(0.0, kStart);
  extremes.observe(1e9, kStart);
  EXPECT_LE(*extremes.quantile(0.0, kStart), SlidingQuantile::kMinMs * 1.05);
  EXPECT_LE(*extremes.quantile(1.0, kStart), SlidingQuantile::kMaxMs);
  EXPECT_GE(*extremes.quantile(1.0, kStart), SlidingQuantile::kMaxMs * 0.95);
}

TEST(SlidingQuantileTest, OldSlotsExpire) {
  SlidingQuantile window(seconds(300), seconds(10));
  for (int i = 0; i < 100; ++i) window.observe(1000.0, kStart);                // slow, early
  for (int i = 0; i < 100; ++i) window.observe(100.0, kStart + seconds(200));  // fast, later
  EXPECT_EQ(window.count(kStart + seconds(200)), 200u);
  EXPECT_NEAR(*window.quantile(0.9, kStart + seconds(200)), 1000.0, 50.0);
  // 300 s after the first slot began, it has left the window; the later one has not.
  EXPECT_EQ(window.count(kStart + seconds(300)), 100u);
  EXPECT_NEAR(*window.quantile(0.9, kStart + seconds(300)), 100.0, 5.0);
  EXPECT_EQ(window.count(kStart + seconds(500)), 0u);
  EXPECT_EQ(window.quantile(0.9, kStart + seconds(500)), std::nullopt);
}

TEST(SlidingQuantileTest, ReusedRingSlotForgetsItsOldSamples) {
  SlidingQuantile window(seconds(30), seconds(10));  // 3 slots
  window.observe(5000.0, kStart);
  window.observe(10.0, kStart + seconds(30));  // same ring position, one lap later
  EXPECT_EQ(window.count(kStart + seconds(30)), 1u);
  EXPECT_NEAR(*window.quantile(1.0, kStart + seconds(30)), 10.0, 0.5);
  // A straggler for the lapped slot is dropped rather than mixed into the newer one.
  window.observe(7000.0, kStart + seconds(1));
  EXPECT_EQ(window.count(kStart + seconds(30)), 1u);
}

TEST(SlidingQuantileTest, ConcurrentObservers) {
  SlidingQuantile window;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&window, t] {
      for (int i = 0; i < 5000; ++i) {
        window.observe(100.0 + t, kStart + std::chrono::milliseconds(i));
        if (i % 100 == 0) (void)window.quantile(0.9, kStart + std::chrono::milliseconds(i));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(window.count(kStart + seconds(5)), 20000u);
}

TEST(EdgeSpeedTest, EstimateUsesTtftAndDecodeSpeed) {
  EdgeSpeed speed(50.0, 100.0);
  EXPECT_DOUBLE_EQ(speed.ttft_ms(), 50.0);
  EXPECT_DOUBLE_EQ(speed.tokens_per_s(), 100.0);
  EXPECT_DOUBLE_EQ(speed.estimate_ms(200), 50.0 + 2000.0);
  EXPECT_DOUBLE_EQ(speed.estimate_ms(0), 50.0);
  EXPECT_DOUBLE_EQ(speed.estimate_ms(-5), 50.0);
}

TEST(EdgeSpeedTest, MovesTowardsObservations) {
  EdgeSpeed speed(50.0, 100.0, 0.5);
  speed.observe(150.0, 100, 500.0);  // 200 tokens/s
  EXPECT_DOUBLE_EQ(speed.ttft_ms(), 100.0);
  EXPECT_DOUBLE_EQ(speed.tokens_per_s(), 150.0);
  for (int i = 0; i < 60; ++i) speed.observe(150.0, 100, 500.0);
  EXPECT_NEAR(speed.ttft_ms(), 150.0, 1e-6);
  EXPECT_NEAR(speed.tokens_per_s(), 200.0, 1e-6);
  EXPECT_NEAR(speed.estimate_ms(100), 150.0 + 500.0, 1e-3);
}

TEST(EdgeSpeedTest, IgnoresUnusableObservationsAndSeeds) {
  EdgeSpeed speed(50.0, 100.0, 0.5);
  speed.observe(NAN, 0, 0.0);
  speed.observe(-1.0, 10, 0.0);
  speed.observe(60.0, 0, 100.0);  // ttft counts, no decode speed from zero tokens
  EXPECT_DOUBLE_EQ(speed.ttft_ms(), 55.0);
  EXPECT_DOUBLE_EQ(speed.tokens_per_s(), 100.0);

  const EdgeSpeed bad(0.0, 0.0);
  EXPECT_GT(bad.tokens_per_s(), 0.0);
  EXPECT_TRUE(std::isfinite(bad.estimate_ms(10)));
}

}  // namespace
}  // namespace hengshi::router
