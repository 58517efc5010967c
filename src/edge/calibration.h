// Confidence calibration for the intent model. fastText's softmax saturates near 1.0 (DESIGN.md
// §7), so its probabilities are not confidences. A Calibrator maps a prediction's logits to a
// calibrated confidence such that, on held-out data, answers given with confidence ≈ c are right
// about c of the time. It is fitted on the training holdout and stored as calibration.json.
//
// Everything here is a pure function or an immutable value: safe to share across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

// One bin of a reliability diagram over [lower, upper) (the last bin includes 1.0).
struct ReliabilityBin {
  double lower = 0;
  double upper = 0;
  std::size_t count = 0;
  double mean_confidence = 0;  // 0 when count == 0
  double accuracy = 0;         // share of correct predictions in the bin; 0 when count == 0
};

// Equal-width bins over [0, 1]. Sizes of the two vectors must match; confidences are clamped.
std::vector<ReliabilityBin> reliability_table(const std::vector<double>& confidences,
                                              const std::vector<bool>& correct, int bins = 10);

// Σ_bins (count / n) · |accuracy − mean_confidence|; 0 for empty input.
double expected_calibration_error(const std::vector<double>& confidences,
                                  const std::vector<bool>& correct, int bins = 10);

nlohmann::json reliability_to_json(const std::vector<ReliabilityBin>& table);

// A held-out prediction: unnormalised logits over all labels (label order of the model) and
// the index of the true label.
struct LabeledLogits {
  std::vector<double> logits;
  int label = 0;
};

// softmax(logits / temperature) into `probabilities` (resized).
void softmax(std::span<const double> logits, double temperature,
             std::vector<double>& probabilities);

// Mean negative log-likelihood of the true labels under softmax(logits / temperature).
double mean_nll(const std::vector<LabeledLogits>& examples, double temperature);

// The temperature in [0.05, 100] minimising mean_nll, by golden-section search on log T
// (the NLL is unimodal in T). Returns 1.0 for empty input.
double fit_temperature(const std::vector<LabeledLogits>& examples);

// Monotone (non-decreasing) map from a score to P(correct), fitted by pool-adjacent-violators
// and evaluated by linear interpolation between the pooled blocks' (mean score, accuracy)
// points; flat outside the fitted range.
class IsotonicMap {
 public:
  IsotonicMap() = default;  // the identity
  static IsotonicMap fit(const std::vector<double>& scores, const std::vector<bool>& correct);
  static Result<IsotonicMap> from_points(std::vector<double> x, std::vector<double> y);

  double operator()(double score) const;
  bool is_identity() const { return x_.empty(); }
  const std::vector<double>& x() const { return x_; }
  const std::vector<double>& y() const { return y_; }

 private:
  std::vector<double> x_;  // strictly increasing
  std::vector<double> y_;  // non-decreasing, in [0, 1]
};

enum class CalibrationMethod { kIdentity, kTemperature, kIsotonic };
std::string_view calibration_method_name(CalibrationMethod method);

// The top-2 view of one prediction after calibration.
struct CalibratedTop2 {
  int first = -1;              // label index of the top prediction (-1 with no labels)
  int second = -1;             // label index of the runner-up (-1 with a single label)
  double raw_probability = 0;  // softmax(logits)[first]: the model's own probability
  double confidence = 0;       // calibrated P(first is right)
  double second_confidence = 0;
};

// Identity, temperature scaling, or temperature scaling followed by an isotonic map of the
// top-1 probability. The isotonic map is applied to the runner-up's probability as well, so
// the margin (confidence − second_confidence) stays on the calibrated scale and ≥ 0.
class Calibrator {
 public:
  Calibrator() = default;  // identity
  static Calibrator temperature(double temperature);
  static Calibrator isotonic(double temperature, IsotonicMap map);

  CalibrationMethod method() const { return method_; }
  double temperature() const { return temperature_; }
  const IsotonicMap& isotonic_map() const { return isotonic_; }

  // `scratch` avoids an allocation per call on the hot path; any vector will do.
  CalibratedTop2 apply(std::span<const double> logits, std::vector<double>& scratch) const;
  CalibratedTop2 apply(std::span<const double> logits) const;

  nlohmann::json to_json() const;
  static Result<Calibrator> from_json(const nlohmann::json& json, std::string_view source);

 private:
  CalibrationMethod method_ = CalibrationMethod::kIdentity;
  double temperature_ = 1.0;
  IsotonicMap isotonic_;
};

struct CalibrationFit {
  Calibrator calibrator;  // fitted on all examples with the chosen method
  std::size_t examples = 0;
  int folds = 0;               // cross-fitting folds used to choose the method
  double accuracy = 0;         // top-1 accuracy on the examples
  double ece_before = 0;       // raw probabilities
  double ece_after = 0;        // chosen method, cross-fitted (out-of-fold)
  double ece_identity_cv = 0;  // cross-fitted ECE of each candidate
  double ece_temperature_cv = 0;
  double ece_isotonic_cv = -1;  // -1 when too few examples to consider isotonic
  std::vector<ReliabilityBin> reliability_before;
  std::vector<ReliabilityBin> reliability_after;  // out-of-fold, chosen method

  nlohmann::json to_json() const;
};

// Chooses identity / temperature / isotonic by cross-fitted ECE (k folds, so the reported ECE is
// not measured on the data a calibrator was fitted on), then refits the winner on all examples.
// Deterministic for a given seed. Isotonic is only considered from kMinIsotonicExamples up.
inline constexpr std::size_t kMinIsotonicExamples = 100;
CalibrationFit fit_calibration(const std::vector<LabeledLogits>& examples, std::uint64_t seed);

}  // namespace hengshi::edge
