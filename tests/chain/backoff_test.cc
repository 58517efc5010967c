#include "chain/backoff.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace hengshi::chain {
namespace {

RetryConfig defaults() { return RetryConfig{}; }

TEST(BackoffTest, EachWaitStaysWithinItsCapOverManyDraws) {
  const RetryConfig config = defaults();
  ASSERT_EQ(config.backoff_ms, (std::vector<std::int64_t>{200, 500, 1000}));
  Jitter jitter(42);
  for (int k = 0; k < 3; ++k) {
    const std::int64_t cap = config.backoff_ms[k];
    std::int64_t low = std::numeric_limits<std::int64_t>::max();
    std::int64_t high = -1;
    double sum = 0;
    const int draws = 20'000;
    for (int i = 0; i < draws; ++i) {
      auto wait = backoff_wait_ms(config, k, jitter.next());
      ASSERT_TRUE(wait.has_value());
      ASSERT_GE(*wait, 0);
      ASSERT_LE(*wait, cap);
      low = std::min(low, *wait);
      high = std::max(high, *wait);
      sum += static_cast<double>(*wait);
    }
    // Full jitter: the whole range is used, and the mean sits near cap / 2.
    EXPECT_LE(low, cap / 50) << "retry " << k;
    EXPECT_GE(high, cap - cap / 50) << "retry " << k;
    EXPECT_NEAR(sum / draws, static_cast<double>(cap) / 2.0, static_cast<double>(cap) * 0.03)
        << "retry " << k;
  }
}

TEST(BackoffTest, DrawEndsMapToZeroAndTheCap) {
  const RetryConfig config = defaults();
  EXPECT_EQ(backoff_wait_ms(config, 0, 0.0), 0);
  EXPECT_EQ(backoff_wait_ms(config, 0, 0.9999999), 200);
  EXPECT_EQ(backoff_wait_ms(config, 2, 0.5), 500);
  // A careless source outside [0, 1) is clamped, never past the cap.
  EXPECT_EQ(backoff_wait_ms(config, 1, 1.5), 500);
  EXPECT_EQ(backoff_wait_ms(config, 1, -0.5), 0);
}

TEST(BackoffTest, RetryAfterIsAFloor) {
  const RetryConfig config = defaults();
  // Above the jittered wait: the upstream's word wins.
  EXPECT_EQ(backoff_wait_ms(config, 0, 0.0, 1500), 1500);
  EXPECT_EQ(backoff_wait_ms(config, 2, 0.999, 3000), 3000);
  // Below it: the jittered wait stands.
  EXPECT_EQ(backoff_wait_ms(config, 1, 0.5, 10), 250);
  Jitter jitter(7);
  for (int i = 0; i < 1000; ++i) {
    auto wait = backoff_wait_ms(config, 1, jitter.next(), 300);
    ASSERT_TRUE(wait.has_value());
    EXPECT_GE(*wait, 300);
    EXPECT_LE(*wait, 500);
  }
}

TEST(BackoffTest, NoRetryPastTheSchedule) {
  const RetryConfig config = defaults();
  EXPECT_EQ(max_retries(config), 3);
  EXPECT_FALSE(backoff_wait_ms(config, 3, 0.1).has_value());
  EXPECT_FALSE(backoff_wait_ms(config, 10, 0.1, 100).has_value());
  EXPECT_FALSE(backoff_wait_ms(config, -1, 0.1).has_value());

  Jitter jitter(1);
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(next_retry_wait_ms(config, k, std::nullopt, 60'000, jitter).has_value());
  }
  EXPECT_FALSE(next_retry_wait_ms(config, 3, std::nullopt, 60'000, jitter).has_value());

  RetryConfig shorter;
  shorter.backoff_ms = {100};
  EXPECT_TRUE(backoff_wait_ms(shorter, 0, 0.5).has_value());
  EXPECT_FALSE(backoff_wait_ms(shorter, 1, 0.5).has_value());
}

TEST(BackoffTest, DisabledOrEmptyScheduleNeverRetries) {
  RetryConfig disabled;
  disabled.enabled = false;
  EXPECT_EQ(max_retries(disabled), 0);
  EXPECT_FALSE(backoff_wait_ms(disabled, 0, 0.5).has_value());
  Jitter jitter(3);
  EXPECT_FALSE(next_retry_wait_ms(disabled, 0, std::nullopt, 60'000, jitter).has_value());

  RetryConfig empty;
  empty.backoff_ms.clear();
  EXPECT_EQ(max_retries(empty), 0);
  EXPECT_FALSE(backoff_wait_ms(empty, 0, 0.5).has_value());
}

TEST(BackoffTest, RetryFitsOnlyWhenTheWaitLeavesAUsefulAttempt) {
  EXPECT_TRUE(retry_fits(100, 150));   // exactly the 50 ms minimum left
  EXPECT_FALSE(retry_fits(101, 150));  // 49 ms left
  EXPECT_FALSE(retry_fits(0, 49));     // not even an attempt
  EXPECT_FALSE(retry_fits(0, 0));
  EXPECT_FALSE(retry_fits(10, -5));  // budget already spent
  EXPECT_TRUE(retry_fits(0, 50));
  EXPECT_TRUE(retry_fits(100, 300, 200));  // a custom minimum
  EXPECT_FALSE(retry_fits(101, 300, 200));
  // A "no deadline" budget does not overflow.
  EXPECT_TRUE(retry_fits(1000, std::numeric_limits<std::int64_t>::max()));
}

TEST(BackoffTest, NoRetryWhenTheWaitDoesNotFitTheBudget) {
  const RetryConfig config = defaults();
  // Retry-After 2 s with 1 s left: no retry, whatever the jitter.
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    Jitter jitter(seed);
    EXPECT_FALSE(next_retry_wait_ms(config, 0, 2000, 1000, jitter).has_value());
  }
  // The longest wait (1 s) plus a useful attempt always fits in 1050 ms; a budget of 40 ms
  // never fits any attempt.
  Jitter jitter(9);
  for (int i = 0; i < 500; ++i) {
    auto wait = next_retry_wait_ms(config, 2, std::nullopt, 1050, jitter);
    ASSERT_TRUE(wait.has_value());
    EXPECT_LE(*wait, 1000);
    EXPECT_FALSE(next_retry_wait_ms(config, 0, std::nullopt, 40, jitter).has_value());
  }
  // With 300 ms left and retry 1 (cap 500): a retry only when the draw leaves 50 ms.
  int retried = 0;
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    auto wait = next_retry_wait_ms(config, 1, std::nullopt, 300, jitter);
    if (wait) {
      ++retried;
      EXPECT_LE(*wait, 250);
    } else {
      ++refused;
    }
  }
  EXPECT_GT(retried, 0);
  EXPECT_GT(refused, 0);
}

TEST(BackoffTest, SameSeedSameSchedule) {
  const RetryConfig config = defaults();
  auto schedule = [&](std::uint64_t seed) {
    Jitter jitter(seed);
    std::vector<std::int64_t> waits;
    for (int round = 0; round < 50; ++round) {
      for (int k = 0; k < 3; ++k) {
        waits.push_back(next_retry_wait_ms(config, k, std::nullopt, 60'000, jitter).value());
      }
    }
    return waits;
  };
  EXPECT_EQ(schedule(1234), schedule(1234));
  EXPECT_NE(schedule(1234), schedule(1235));
}

TEST(BackoffTest, JitterDrawsAreInTheUnitInterval) {
  Jitter jitter(0);
  for (int i = 0; i < 100'000; ++i) {
    double draw = jitter();
    ASSERT_GE(draw, 0.0);
    ASSERT_LT(draw, 1.0);
  }
  // from_entropy gives a working engine too.
  Jitter random = Jitter::from_entropy();
  double draw = random.next();
  EXPECT_GE(draw, 0.0);
  EXPECT_LT(draw, 1.0);
}

}  // namespace
}  // namespace hengshi::chain
