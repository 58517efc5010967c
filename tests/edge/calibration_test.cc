#include "edge/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace hengshi::edge {
namespace {

TEST(CalibrationTest, EceIsZeroWhenConfidenceMatchesAccuracy) {
  std::vector<double> confidences(100, 0.8);
  std::vector<bool> correct(100, false);
  for (int i = 0; i < 80; ++i) correct[static_cast<std::size_t>(i)] = true;
  EXPECT_NEAR(expected_calibration_error(confidences, correct), 0.0, 1e-12);
}

TEST(CalibrationTest, EceMeasuresOverConfidence) {
  std::vector<double> confidences(100, 0.99);
  std::vector<bool> correct(100, false);
  for (int i = 0; i < 70; ++i) correct[static_cast<std::size_t>(i)] = true;
  EXPECT_NEAR(expected_calibration_error(confidences, correct), 0.29, 1e-9);
  EXPECT_EQ(expected_calibration_error({}, {}), 0.0);
}

TEST(CalibrationTest, ReliabilityTableBinsByConfidence) {
  const std::vector<double> confidences = {0.05, 0.15, 0.15, 0.95, 1.0};
  const std::vector<bool> correct = {false, true, false, true, true};
  const auto table = reliability_table(confidences, correct, 10);
  ASSERT_EQ(table.size(), 10u);
  EXPECT_EQ(table[0].count, 1u);
  EXPECT_EQ(table[1].count, 2u);
  EXPECT_DOUBLE_EQ(table[1].accuracy, 0.5);
  EXPECT_DOUBLE_EQ(table[1].mean_confidence, 0.15);
  EXPECT_EQ(table[9].count, 2u);  // 1.0 falls into the last bin
  EXPECT_DOUBLE_EQ(table[9].lower, 0.9);
  EXPECT_EQ(reliability_to_json(table).size(), 10u);
}

// Labels drawn from softmax(z), logits reported as sharpness · z: an over-confident model.
std::vector<LabeledLogits> overconfident_examples(double sharpness, int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.5);
  std::vector<LabeledLogits> examples;
  std::vector<double> probabilities;
  for (int n = 0; n < count; ++n) {
    std::vector<double> z(5);
    for (double& v : z) v = normal(rng);
    softmax(z, 1.0, probabilities);
    std::discrete_distribution<int> draw(probabilities.begin(), probabilities.end());
    LabeledLogits example;
    example.label = draw(rng);
    for (double v : z) example.logits.push_back(sharpness * v);
    examples.push_back(std::move(example));
  }
  return examples;
}

TEST(CalibrationTest, TemperatureRecoversTheSharpening) {
  const auto examples = overconfident_examples(4.0, 4000, 7);
  const double temperature = fit_temperature(examples);
  EXPECT_NEAR(temperature, 4.0, 0.4);
  EXPECT_LT(mean_nll(examples, temperature), mean_nll(examples, 1.0));
}

TEST(CalibrationTest, FittingReducesEceOfOverconfidentScores) {
  const auto examples = overconfident_examples(5.0, 1500, 11);
  const CalibrationFit fit = fit_calibration(examples, 3);
  EXPECT_GT(fit.ece_before, 0.1);
  EXPECT_LT(fit.ece_after, fit.ece_before / 2);
  EXPECT_NE(fit.calibrator.method(), CalibrationMethod::kIdentity);
  EXPECT_EQ(fit.folds, 5);
  EXPECT_GE(fit.ece_isotonic_cv, 0.0);  // enough examples to consider isotonic

  // Out-of-sample check on fresh data from the same model.
  const auto fresh = overconfident_examples(5.0, 1500, 12);
  std::vector<double> raw;
  std::vector<double> calibrated;
  std::vector<bool> correct;
  for (const LabeledLogits& example : fresh) {
    const CalibratedTop2 top = fit.calibrator.apply(example.logits);
    raw.push_back(top.raw_probability);
    calibrated.push_back(top.confidence);
    correct.push_back(top.first == example.label);
  }
  EXPECT_LT(expected_calibration_error(calibrated, correct),
            expected_calibration_error(raw, correct) / 2);
}

TEST(CalibrationTest, WellCalibratedScoresStayNearlyUntouched) {
  const auto examples = overconfident_examples(1.0, 2000, 5);
  const CalibrationFit fit = fit_calibration(examples, 1);
  EXPECT_LT(fit.ece_after, 0.05);
  EXPECT_NEAR(fit_temperature(examples), 1.0, 0.15);
}

TEST(CalibrationTest, PoolAdjacentViolatorsMergesViolations) {
  const IsotonicMap map = IsotonicMap::fit({0.1, 0.2, 0.3, 0.4}, {true, false, true, true});
  ASSERT_EQ(map.x().size(), 3u);
  EXPECT_DOUBLE_EQ(map.x()[0], 0.15);
  EXPECT_DOUBLE_EQ(map.y()[0], 0.5);
  EXPECT_DOUBLE_EQ(map(0.0), 0.5);       // flat below the range
  EXPECT_DOUBLE_EQ(map(0.9), 1.0);       // flat above it
  EXPECT_NEAR(map(0.225), 0.75, 1e-12);  // linear in between
}

TEST(CalibrationTest, IsotonicMapIsMonotone) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> scores;
  std::vector<bool> correct;
  for (int i = 0; i < 2000; ++i) {
    const double s = uniform(rng);
    scores.push_back(s);
    correct.push_back(uniform(rng) < s * s);  // noisy, increasing in s
  }
  const IsotonicMap map = IsotonicMap::fit(scores, correct);
  for (std::size_t i = 1; i < map.y().size(); ++i) {
    EXPECT_LT(map.x()[i - 1], map.x()[i]);
    EXPECT_LE(map.y()[i - 1], map.y()[i]);
  }
  double previous = -1.0;
  for (double s = 0.0; s <= 1.0; s += 0.001) {
    const double v = map(s);
    EXPECT_GE(v, previous);
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
    previous = v;
  }
}

TEST(CalibrationTest, ApplyGivesTopTwoAndNonNegativeMargin) {
  const std::vector<double> logits = {1.0, 5.0, 3.0};
  for (const Calibrator& calibrator :
       {Calibrator(), Calibrator::temperature(2.0),
        Calibrator::isotonic(2.0, IsotonicMap::fit({0.2, 0.5, 0.9}, {false, true, true}))}) {
    const CalibratedTop2 top = calibrator.apply(logits);
    EXPECT_EQ(top.first, 1);
    EXPECT_EQ(top.second, 2);
    EXPECT_GE(top.confidence, top.second_confidence);
    EXPECT_GT(top.raw_probability, 0.8);
  }
  const CalibratedTop2 softened = Calibrator::temperature(2.0).apply(logits);
  EXPECT_LT(softened.confidence, Calibrator().apply(logits).confidence);
}

TEST(CalibrationTest, CalibratorRoundTripsThroughJson) {
  const Calibrator isotonic =
      Calibrator::isotonic(1.7, IsotonicMap::fit({0.2, 0.5, 0.9}, {false, true, true}));
  auto parsed = Calibrator::from_json(isotonic.to_json(), "calibration.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->method(), CalibrationMethod::kIsotonic);
  EXPECT_DOUBLE_EQ(parsed->temperature(), 1.7);
  EXPECT_EQ(parsed->isotonic_map().x(), isotonic.isotonic_map().x());

  nlohmann::json bad = Calibrator::temperature(2.0).to_json();
  bad["temperature"] = -1;
  auto rejected = Calibrator::from_json(bad, "m/calibration.json");
  ASSERT_FALSE(rejected);
  EXPECT_NE(rejected.error().message.find("m/calibration.json"), std::string::npos);
  EXPECT_NE(rejected.error().message.find("temperature"), std::string::npos);

  bad = Calibrator().to_json();
  bad["method"] = "platt";
  EXPECT_FALSE(Calibrator::from_json(bad, "calibration.json"));

  auto not_monotone = IsotonicMap::from_points({0.1, 0.2}, {0.9, 0.1});
  EXPECT_FALSE(not_monotone);
}

}  // namespace
}  // namespace hengshi::edge
