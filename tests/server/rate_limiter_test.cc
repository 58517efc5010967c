#include "server/rate_limiter.h"

#include <gtest/gtest.h>

namespace hengshi::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

ClientKey key_with(std::int64_t rpm, std::int64_t tpm, std::optional<double> budget,
                   std::string name = "k") {
  ClientKey key;
  key.name = std::move(name);
  key.rpm = rpm;
  key.tpm = tpm;
  key.budget = budget;
  return key;
}

TEST(TokenBucketTest, StartsFullRefillsContinuouslyAndCapsAtCapacity) {
  const auto t0 = LimitClock::time_point{} + seconds(1000);
  TokenBucket bucket;
  bucket.set_rate(60, t0);  // one per second
  EXPECT_DOUBLE_EQ(bucket.level(t0), 60);
  bucket.take(60, t0);
  EXPECT_DOUBLE_EQ(bucket.level(t0), 0);
  EXPECT_EQ(bucket.seconds_until(1, t0), 1);
  EXPECT_NEAR(bucket.level(t0 + milliseconds(2500)), 2.5, 1e-9);
  EXPECT_DOUBLE_EQ(bucket.level(t0 + seconds(3600)), 60);
  bucket.take(70, t0 + seconds(3600));  // debt
  EXPECT_EQ(bucket.seconds_until(1, t0 + seconds(3600)), 11);
}

TEST(KeyLimitsTest, UnlimitedKeyIsAlwaysAdmitted) {
  KeyLimits limits;
  const ClientKey key = key_with(0, 0, std::nullopt);
  const auto now = LimitClock::time_point{} + seconds(5);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limits.admit(key, now).allowed);
}

TEST(KeyLimitsTest, RpmRefusesTheExtraRequestWithRetryAfterAndRefills) {
  KeyLimits limits;
  const ClientKey key = key_with(3, 0, std::nullopt);
  const auto t0 = LimitClock::time_point{} + seconds(100);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limits.admit(key, t0).allowed) << i;
  Admission refused = limits.admit(key, t0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.limit, "rpm");
  EXPECT_EQ(refused.retry_after_s, 20);  // 3 per minute: one every 20 s
  EXPECT_FALSE(limits.admit(key, t0 + seconds(19)).allowed);
  EXPECT_TRUE(limits.admit(key, t0 + seconds(20)).allowed);
  EXPECT_FALSE(limits.admit(key, t0 + seconds(20)).allowed);
}

TEST(KeyLimitsTest, TpmIsChargedAfterTheAnswerAndRefusesOnceUsedUp) {
  KeyLimits limits;
  const ClientKey key = key_with(0, 600, std::nullopt);  // 10 tokens per second
  const auto t0 = LimitClock::time_point{} + seconds(100);
  EXPECT_TRUE(limits.admit(key, t0).allowed);
  limits.charge(key, 500, 0.0, t0);
  EXPECT_TRUE(limits.admit(key, t0).allowed);  // 100 left
  limits.charge(key, 250, 0.0, t0);            // 150 in debt: the answer had already happened
  Admission refused = limits.admit(key, t0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.limit, "tpm");
  EXPECT_EQ(refused.retry_after_s, 16);  // (150 + 1) / 10 per second, rounded up
  EXPECT_TRUE(limits.admit(key, t0 + seconds(16)).allowed);
}

TEST(KeyLimitsTest, BudgetRefusesOnceSpentAndKeysAreIndependent) {
  KeyLimits limits;
  const ClientKey a = key_with(0, 0, 1.0, "a");
  const ClientKey b = key_with(0, 0, 1.0, "b");
  const auto now = LimitClock::time_point{} + seconds(1);
  EXPECT_TRUE(limits.admit(a, now).allowed);
  limits.charge(a, 10, 0.6, now);
  EXPECT_TRUE(limits.admit(a, now).allowed);
  limits.charge(a, 10, 0.6, now);
  EXPECT_DOUBLE_EQ(limits.spent("a"), 1.2);
  Admission refused = limits.admit(a, now);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.limit, "budget");
  EXPECT_TRUE(limits.admit(b, now).allowed);
  EXPECT_DOUBLE_EQ(limits.spent("b"), 0.0);
}

TEST(KeyLimitsTest, StateSurvivesAReloadByNameAndANewLimitAppliesAtOnce) {
  KeyLimits limits;
  const auto t0 = LimitClock::time_point{} + seconds(100);
  const ClientKey before = key_with(10, 0, 5.0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(limits.admit(before, t0).allowed);
  limits.charge(before, 0, 2.0, t0);
  // The reloaded key is a different object with the same name and a lower limit.
  const ClientKey after = key_with(4, 0, 2.0);
  Admission refused = limits.admit(after, t0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.limit, "budget");  // 2.0 spent before the reload counts
  const ClientKey raised = key_with(4, 0, 10.0);
  Admission rpm = limits.admit(raised, t0);
  EXPECT_FALSE(rpm.allowed);  // 4 were used this minute, and the limit is now 4
  EXPECT_EQ(rpm.limit, "rpm");
}

}  // namespace
}  // namespace hengshi::server
