#include "sim/request_plan.h"

#include <vector>

#include <gtest/gtest.h>

namespace hengshi::sim {
namespace {

Behaviour faulty() {
  Behaviour b;
  b.latency_ms = {50, 200};
  b.ttft_ms = {10, 40};
  b.output_tokens = {3, 300};
  b.error_rate = 0.1;
  b.rate_limit_rate = 0.1;
  b.hang_rate = 0.1;
  b.disconnect_rate = 0.1;
  b.garbage_rate = 0.1;
  return b;
}

std::vector<RequestPlan> run(std::uint64_t seed, int count, const Behaviour& behaviour) {
  std::vector<RequestPlan> plans;
  for (int k = 0; k < count; ++k) {
    plans.push_back(plan_request(behaviour, seed, static_cast<std::uint64_t>(k), k % 3 == 0, {}));
  }
  return plans;
}

TEST(RequestPlanTest, SameSeedReplaysTheSameSequence) {
  EXPECT_EQ(run(42, 500, faulty()), run(42, 500, faulty()));
}

TEST(RequestPlanTest, DifferentSeedsGiveDifferentSequences) {
  auto a = run(42, 500, faulty());
  auto b = run(43, 500, faulty());
  int outcome_differences = 0;
  for (std::size_t i = 0; i < a.size(); ++i) outcome_differences += a[i].outcome != b[i].outcome;
  EXPECT_NE(a, b);
  EXPECT_GT(outcome_differences, 100);
}

TEST(RequestPlanTest, RequestKDependsOnlyOnSeedAndK) {
  // Planned out of order, and with another request's draws in between: the same plan.
  RequestPlan direct = plan_request(faulty(), 7, 1234, false, {});
  (void)plan_request(faulty(), 7, 99, true, {});
  EXPECT_EQ(plan_request(faulty(), 7, 1234, false, {}), direct);
}

TEST(RequestPlanTest, OutcomeSharesFollowTheRates) {
  constexpr int kRequests = 20'000;
  int counts[6] = {};
  for (const RequestPlan& plan : run(5, kRequests, faulty())) {
    ++counts[static_cast<int>(plan.outcome)];
  }
  EXPECT_NEAR(counts[static_cast<int>(Outcome::kOk)], 0.5 * kRequests, 0.02 * kRequests);
  for (Outcome fault : {Outcome::kError, Outcome::kRateLimit, Outcome::kHang, Outcome::kDisconnect,
                        Outcome::kGarbage}) {
    EXPECT_NEAR(counts[static_cast<int>(fault)], 0.1 * kRequests, 0.015 * kRequests)
        << outcome_name(fault);
  }
}

TEST(RequestPlanTest, HealthyDefaultsAnswerAtOnce) {
  for (const RequestPlan& plan : run(1, 200, Behaviour{})) {
    EXPECT_EQ(plan.outcome, Outcome::kOk);
    EXPECT_EQ(plan.delay_ms, 0);
    EXPECT_EQ(plan.token_interval_us, 0);
    EXPECT_GE(plan.output_tokens, 8);
    EXPECT_LE(plan.output_tokens, 32);
  }
}

TEST(RequestPlanTest, StreamWaitsTtftAndNonStreamWaitsLatency) {
  Behaviour b;
  b.latency_ms = {300, 300};
  b.ttft_ms = {20, 20};
  b.tokens_per_s = 50;
  EXPECT_EQ(plan_request(b, 1, 0, /*stream=*/false, {}).delay_ms, 300);
  RequestPlan streamed = plan_request(b, 1, 0, /*stream=*/true, {});
  EXPECT_EQ(streamed.delay_ms, 20);
  EXPECT_EQ(streamed.token_interval_us, 20'000);
}

TEST(RequestPlanTest, MarkersForceOutcomeAndDelay) {
  Behaviour b;
  b.latency_ms = {300, 300};
  b.retry_after_s = 4;
  RequestPlan plan = plan_request(b, 1, 0, false, parse_markers("hi [[sim:429]]"));
  EXPECT_EQ(plan.outcome, Outcome::kRateLimit);
  EXPECT_EQ(plan.delay_ms, 0);  // faults answer at once
  EXPECT_EQ(plan.retry_after_s, 4);

  plan = plan_request(b, 1, 0, false, parse_markers("[[sim:error]] [[sim:slow=25]]"));
  EXPECT_EQ(plan.outcome, Outcome::kError);
  EXPECT_EQ(plan.delay_ms, 25);  // slow applies to every outcome

  plan = plan_request(faulty(), 1, 0, true, parse_markers("[[sim:slow=0]]"));
  EXPECT_EQ(plan.delay_ms, 0);
}

TEST(RequestPlanTest, ParseMarkers) {
  EXPECT_FALSE(parse_markers("plain text").forced_outcome);
  EXPECT_EQ(parse_markers("[[sim:hang]]").forced_outcome, Outcome::kHang);
  EXPECT_EQ(parse_markers("a [[sim:garbage]] b").forced_outcome, Outcome::kGarbage);
  EXPECT_EQ(parse_markers("[[sim:disconnect]]").forced_outcome, Outcome::kDisconnect);
  EXPECT_EQ(parse_markers("[[sim:error]] then [[sim:429]]").forced_outcome, Outcome::kRateLimit);
  EXPECT_EQ(parse_markers("[[sim:slow=1500]]").slow_ms, 1500);
  EXPECT_FALSE(parse_markers("[[sim:slow=abc]]").slow_ms);
  EXPECT_FALSE(parse_markers("[[sim:slow=-3]]").slow_ms);
  EXPECT_FALSE(parse_markers("[[sim:unknown]] [[sim:hang").forced_outcome);
  EXPECT_EQ(parse_markers("is it right? [[sim:reply=yes]]").reply, "yes");
  EXPECT_FALSE(parse_markers("plain").reply);
}

}  // namespace
}  // namespace hengshi::sim
