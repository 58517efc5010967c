#include "edge/llm_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace hengshi::edge {
namespace {

double reference_log_sum_exp(const std::vector<float>& logits, float max_logit) {
  double sum = 0.0;
  for (float l : logits) {
    if (!std::isnan(l)) sum += std::exp(static_cast<double>(l) - max_logit);
  }
  return std::log(sum);
}

TEST(LlmSampling, ExpMatchesTheLibraryOverItsRange) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    worst = std::max(worst, std::abs(exp_nonpositive(x) / std::exp(double(x)) - 1.0));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_FLOAT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_LT(exp_nonpositive(-1000.0f), 1e-37f);
  EXPECT_LT(exp_nonpositive(std::numeric_limits<float>::quiet_NaN()), 1e-37f);
}

TEST(LlmSampling, StatsMatchAReferenceForEveryTailLength) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int count : {1, 7, 16, 17, 33, 1000, 151936}) {
    std::vector<float> logits(static_cast<std::size_t>(count));
    for (auto& l : logits) l = normal(rng);
    const auto stats = logit_stats(logits.data(), count);
    int argmax = 0;
    for (int i = 1; i < count; ++i) {
      if (logits[i] > logits[argmax]) argmax = i;
    }
    EXPECT_EQ(stats.argmax, argmax) << count;
    EXPECT_EQ(stats.max_logit, logits[argmax]) << count;
    EXPECT_NEAR(stats.log_sum_exp, reference_log_sum_exp(logits, stats.max_logit), 1e-4) << count;
  }
}

TEST(LlmSampling, IgnoresNanAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits(40, -inf);
  logits[3] = nan;
  logits[21] = 2.0f;
  logits[22] = 2.0f;  // a tie: the first index wins
  logits[30] = 1.0f;
  const auto stats = logit_stats(logits.data(), static_cast<int>(logits.size()));
  EXPECT_EQ(stats.argmax, 21);
  EXPECT_EQ(stats.max_logit, 2.0f);
  EXPECT_NEAR(stats.log_sum_exp, std::log(2.0 + std::exp(-1.0)), 1e-5);

  std::vector<float> all_masked(20, -inf);
  const auto empty = logit_stats(all_masked.data(), 20);
  EXPECT_FALSE(std::isfinite(empty.max_logit));
  EXPECT_EQ(empty.argmax, 0);
}

}  // namespace
}  // namespace hengshi::edge
