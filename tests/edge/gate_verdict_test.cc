// The regression gate's comparison: a candidate no worse than the baseline beyond the
// tolerances passes; each way it is worse is named.
#include "edge/gate_verdict.h"

#include <gtest/gtest.h>

namespace hengshi::edge {
namespace {

GateSide side(double f1, double speed) {
  GateSide s;
  s.f1 = f1;
  s.tokens_per_second = speed;
  return s;
}

TEST(LlmGateTest, PassesWithinTheTolerances) {
  const GateTolerance tolerance{0.02, 0.25};
  EXPECT_TRUE(judge(side(0.60, 100), side(0.60, 100), tolerance).passed);
  EXPECT_TRUE(judge(side(0.585, 80), side(0.60, 100), tolerance).passed);  // just inside both
  EXPECT_TRUE(judge(side(0.90, 300), side(0.60, 100), tolerance).passed);  // better
}

TEST(LlmGateTest, NamesEachWayTheCandidateIsWorse) {
  const GateTolerance tolerance{0.02, 0.25};
  const auto worse_answers = judge(side(0.50, 100), side(0.60, 100), tolerance);
  EXPECT_FALSE(worse_answers.passed);
  ASSERT_EQ(worse_answers.reasons.size(), 1u);
  EXPECT_NE(worse_answers.reasons[0].find("F1 0.500"), std::string::npos) << worse_answers.reasons[0];

  const auto slower = judge(side(0.60, 70), side(0.60, 100), tolerance);
  EXPECT_FALSE(slower.passed);
  ASSERT_EQ(slower.reasons.size(), 1u);
  EXPECT_NE(slower.reasons[0].find("tok/s"), std::string::npos);

  EXPECT_EQ(judge(side(0.1, 10), side(0.6, 100), tolerance).reasons.size(), 2u);
  // No speed measured for the baseline: speed is not judged.
  EXPECT_TRUE(judge(side(0.6, 1), side(0.6, 0), tolerance).passed);
}

}  // namespace
}  // namespace hengshi::edge
