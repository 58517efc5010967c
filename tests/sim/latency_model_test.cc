#include "sim/latency_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hengshi::sim {
namespace {

// The q-quantile of `values` (sorted in place).
double quantile(std::vector<double>& values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))];
}

std::vector<double> draws(const LatencyModel& model, int count) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    SimRandom random(/*seed=*/2024, static_cast<std::uint64_t>(i));
    out.push_back(model.sample_ms(random));
  }
  return out;
}

TEST(LatencyModelTest, FittedPercentilesMatchTargetsWithinTenPercent) {
  for (LatencyPercentiles target :
       {LatencyPercentiles{100, 400}, LatencyPercentiles{20, 25}, LatencyPercentiles{800, 5000}}) {
    LatencyModel model(target);
    auto values = draws(model, 20'000);
    double p50 = quantile(values, 0.50);
    double p95 = quantile(values, 0.95);
    EXPECT_NEAR(p50, target.p50_ms, 0.10 * target.p50_ms) << "p50 of " << target.p50_ms;
    EXPECT_NEAR(p95, target.p95_ms, 0.10 * target.p95_ms) << "p95 of " << target.p95_ms;
    EXPECT_GT(values.front(), 0);
  }
}

TEST(LatencyModelTest, ZeroMedianIsImmediateAndEqualPercentilesAreFixed) {
  LatencyModel zero({0, 0});
  LatencyModel fixed({75, 75});
  for (int i = 0; i < 100; ++i) {
    SimRandom a(1, static_cast<std::uint64_t>(i));
    SimRandom b(1, static_cast<std::uint64_t>(i));
    EXPECT_EQ(zero.sample_ms(a), 0);
    EXPECT_NEAR(fixed.sample_ms(b), 75, 1e-9);
  }
}

TEST(LatencyModelTest, ConsumesTheSameDrawsWhateverTheParameters) {
  SimRandom after_zero(9, 9);
  SimRandom after_spread(9, 9);
  LatencyModel({0, 0}).sample_ms(after_zero);
  LatencyModel({10, 90}).sample_ms(after_spread);
  EXPECT_EQ(after_zero.next(), after_spread.next());
}

TEST(LatencyModelTest, TailIsCapped) {
  LatencyModel wild({500'000, 600'000});
  for (int i = 0; i < 1000; ++i) {
    SimRandom random(3, static_cast<std::uint64_t>(i));
    EXPECT_LE(wild.sample_ms(random), LatencyModel::kMaxLatencyMs);
  }
}

TEST(LatencyModelTest, ValidateExplainsBadPercentiles) {
  EXPECT_EQ(std::string(LatencyModel::validate({0, 0})), "");
  EXPECT_EQ(std::string(LatencyModel::validate({10, 20})), "");
  EXPECT_EQ(std::string(LatencyModel::validate({20, 10})), "p95 must be >= p50");
  EXPECT_NE(std::string(LatencyModel::validate({0, 10})), "");
  EXPECT_NE(std::string(LatencyModel::validate({-1, 10})), "");
}

}  // namespace
}  // namespace hengshi::sim
