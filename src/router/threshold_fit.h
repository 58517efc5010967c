// Fitting one confidence band from labelled held-out predictions, for `hengshi calibrate`. The
// caller fits all rows (→ default_band), then each task type and intent with enough samples.
//
// Pure functions over values; safe to call from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "edge/intent_dataset.h"

namespace hengshi::router {

using edge::kOutOfScopeIntent;  // "__oos__", the label of out-of-scope rows
inline constexpr double kMonotonicTolerance = 0.02;  // pass-rate dip tolerated between buckets
inline constexpr int kFitBuckets = 10;               // equal-width buckets on [0, 1]

struct LabelledPrediction {
  std::string task_type;
  std::string intent_true;       // kOutOfScopeIntent when the request is out of scope
  std::string intent_predicted;  // kOutOfScopeIntent is treated as predicted_oos
  double confidence = 0;         // calibrated, in [0, 1] (clamped; NaN counts as 0)
  bool predicted_oos = false;
};

// An "edge pass": predicted in scope AND predicted == true intent. A true __oos__ answered in
// scope is a failure. Predictions the model itself calls out of scope are never answered by the
// edge, so they count in `samples` but not in `answered` or the pass rate.
bool is_answered(const LabelledPrediction& row);
bool is_edge_pass(const LabelledPrediction& row);

struct BucketRow {
  double lo = 0;
  double hi = 0;             // [lo, hi); the last bucket includes 1.0
  std::size_t samples = 0;   // all predictions in the bucket
  double share = 0;          // samples / all predictions; sums to 1 over the buckets
  std::size_t answered = 0;  // predicted in scope
  double pass_rate = 0;      // edge passes / answered; 0 when answered == 0
};

struct FitResult {
  double high = 1.01;  // kEdgeNever when unreachable or disabled by the monotonicity rule
  double low = 0.5;
  // The search found a threshold meeting the target with enough support (high may still be
  // kEdgeNever by the monotonicity rule).
  bool reachable = false;
  double precision_at_high = 0;  // over answered predictions with confidence >= the final high
  double coverage_at_high = 0;   // those predictions / all predictions (0 when disabled)
  bool monotonic = true;
  std::string note;  // empty when there is nothing to explain
  std::vector<BucketRow> buckets;
  std::size_t samples = 0;
};

// high: the LOWEST threshold t, searched over the distinct confidences of answered predictions,
// such that the answered predictions with confidence >= t number at least min_support and have
// precision >= target_precision. None → kEdgeNever, reachable = false.
//
// Monotonicity: walking the buckets with >= min_support answered predictions from the top down,
// a bucket whose pass rate is below the next supported bucket under it by more than
// kMonotonicTolerance is flagged (monotonic = false, noted). The rule applied: when the flagged
// bucket is the TOP supported bucket and its own pass rate is below target_precision, the
// group's most confident answers are its worst, so its confidence is not trusted and high is
// raised to kEdgeNever (edge disabled for the group). Otherwise the threshold is kept: the
// precision over [high, 1] already meets the target and dips lower down are below high or
// averaged out.
//
// low: from an isotonic (pool-adjacent-violators) fit of "predicted intent is right" (out of
// scope counted as a label) on confidence over all predictions: the lowest confidence from
// which that fitted accuracy is >= 0.5 (kEdgeNever when it never is). Fewer than min_support
// predictions → 0.5. Finally clamped to <= high.
FitResult fit_band(const std::vector<LabelledPrediction>& rows, double target_precision,
                   std::size_t min_support = 20);

}  // namespace hengshi::router
