// Fitting one confidence band from labelled held-out predictions, for `hengshi calibrate`: the
// search for the lowest threshold meeting a target precision (fit_band), the shrinkage rules
// that let a small group keep its parent's band unless its own rows show otherwise
// (shrink_band), and the reweighting of rows to another out-of-scope share (prior shift).
//
// Every count below is weighted by LabelledPrediction::weight (1 unless reweighted); with all
// weights 1 they are plain row counts. Wilson bounds use the effective sample size of the
// weights (Kish: (sum w)^2 / sum w^2), so upweighting a few rows does not pass for more evidence.
//
// Pure functions over values; safe to call from any thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "edge/intent_dataset.h"
#include "router/thresholds.h"

namespace hengshi::router {

using edge::kOutOfScopeIntent;                       // "__oos__", the label of out-of-scope rows
inline constexpr double kMonotonicTolerance = 0.02;  // pass-rate dip tolerated between buckets
inline constexpr int kFitBuckets = 10;               // equal-width buckets on [0, 1]

struct LabelledPrediction {
  std::string task_type;
  std::string intent_true;       // kOutOfScopeIntent when the request is out of scope
  std::string intent_predicted;  // kOutOfScopeIntent is treated as predicted_oos
  double confidence = 0;         // calibrated, in [0, 1] (clamped; NaN counts as 0)
  bool predicted_oos = false;
  // The predicted intent has a canned answer. decide() never lets the edge answer without one, so
  // the final policy's figures count such a row as not answered; band fitting ignores it (a band
  // is about the model's confidence, and an answer may be added to the FAQ later).
  bool has_answer = true;
  // A stand-in out-of-scope row from the model directory (edge::SyntheticOosRow), not a row of
  // the calibration data: counted in the fit, left out of the data's own out-of-scope share.
  bool synthetic = false;
  double weight = 1;  // >= 0; set by reweight_to_oos_share, 1 = the row as sampled
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
  double pass_rate = 0;      // edge passes / answered (weighted); 0 when answered == 0
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
  double point_high = 1.01;  // the high the point estimate alone would give (== high without a bound)
};

// Answered predictions at or above a threshold, weighted.
struct Tally {
  std::size_t rows = 0;
  double weight = 0;          // sum of weights
  double weight_squared = 0;  // sum of squared weights, for the effective sample size
  double pass_weight = 0;     // sum of the weights of edge passes
  double precision() const { return weight > 0 ? pass_weight / weight : 0; }
  double effective_n() const { return weight_squared > 0 ? weight * weight / weight_squared : 0; }
};
Tally answered_at_or_above(const std::vector<LabelledPrediction>& rows, double threshold);

// One-sided Wilson score bounds, at `confidence` (default 95%), of a proportion seen over
// `effective_n` trials; (0, 1) when effective_n is 0 (no evidence either way).
double wilson_lower_bound(double proportion, double effective_n, double confidence = 0.95);
double wilson_upper_bound(double proportion, double effective_n, double confidence = 0.95);

// The out-of-scope share of rows (true intent kOutOfScopeIntent), weighted; 0 when empty.
double oos_share_of(const std::vector<LabelledPrediction>& rows);

// Prior shift: sets each row's weight so that out-of-scope rows make up `oos_share` of the total
// weight: out-of-scope rows S/s0, in-scope rows (1-S)/(1-s0), s0 = the rows' own share (weights
// reset first). Errors ("invalid_argument"): S not in [0, 1); S > 0 when the rows hold no
// out-of-scope row (nothing to reweight); no in-scope row.
Status reweight_to_oos_share(std::vector<LabelledPrediction>& rows, double oos_share);

// The in-scope traffic's mix over intents: intent -> share (any non-negative scale; normalised
// over the intents the rows hold). A few FAQ intents take most of a service's traffic, while
// calibration rows come a few dozen per intent.
using IntentPrior = std::map<std::string, double>;

// Label shift within scope: scales each in-scope row's weight so that the in-scope weight splits
// over the true intents as `prior` says, keeping the in-scope total (out-of-scope rows, and so the
// out-of-scope share, are unchanged). The errors a popular intent's questions make then count as
// often as that intent is asked, and a rare one's count less. A row whose intent the prior lacks
// (or gives 0) weighs 0. Errors ("invalid_argument"): a negative or non-finite share; no in-scope
// row whose intent has a share > 0.
Status reweight_to_intent_prior(std::vector<LabelledPrediction>& rows, const IntentPrior& prior);

// high: the LOWEST threshold t, searched over the distinct confidences of answered predictions,
// such that the answered predictions with confidence >= t have an effective sample size of at
// least min_support and precision >= target_precision. None → kEdgeNever, reachable = false.
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
//
// confidence > 0: "meets the target" means the one-sided Wilson LOWER bound of the precision at
// that confidence (Kish's effective n) is >= target_precision, not the point estimate: a
// threshold that only fits these rows is not taken. `point_high` keeps the point estimate's high
// so the report can say which groups the bound made stricter. 0 = the point estimate.
FitResult fit_band(const std::vector<LabelledPrediction>& rows, double target_precision,
                   std::size_t min_support = 20, double confidence = 0.0);

// Which rule set a group's band (shrink_band).
enum class BandRule {
  fitted,                // the root: fit_band on all rows
  inherited_too_few,     // fewer than min_support rows: no evidence, the parent's band
  inherited_consistent,  // enough rows, none showing the parent wrong: the parent's band
  stricter,              // shown below target at the parent's high: high raised
  looser,                // shown above target lower down: high lowered
};
std::string_view to_string(BandRule rule);  // "fitted", "inherited", "stricter", "looser"
inline bool is_inherited(BandRule rule) {
  return rule == BandRule::inherited_too_few || rule == BandRule::inherited_consistent;
}

struct ShrinkResult {
  BandRule rule = BandRule::inherited_too_few;
  Band band;           // the parent's band when inherited
  std::string reason;  // one line, e.g. "stricter: Wilson upper 0.930 < 0.970 at parent high 0.840"
  Tally at_parent_high;          // the group's answered rows at or above the parent's high
  double precision_at_high = 0;  // over the group's answered rows at or above band.high
  double coverage_at_high = 0;   // those rows' weight / all the group's weight
  FitResult fit;                 // fit_band of the group alone: its buckets for the table, and low
};

// Shrinkage toward the parent's band. A group's rows are evidence against the parent's band, not
// a fresh fit: too few rows is no evidence (20 of 20 right is consistent with a true precision
// near 0.88), so the group keeps the parent's band unless
//  - stricter: the 95% Wilson UPPER bound of its precision at the parent's high is under the
//    target (its rows show it below target with confidence). high = the lowest threshold above
//    the parent's high where its own precision meets the target, kEdgeNever if none;
//  - looser: at some threshold under the parent's high its answered rows have an effective size
//    >= min_support and a 95% Wilson LOWER bound >= target. high = the lowest such threshold.
// Stricter is checked first and wins. A band of its own takes low from the group's fit when it
// has >= min_support rows (the parent's low otherwise), clamped to <= high.
// `confidence` > 0 sets the level of both Wilson bounds and makes the raised high a bound too;
// 0 keeps the 95% bounds for the decision and the point estimate for the raised high.
// `siblings`: how many groups of this kind are shrunk toward the same policy. With bounds, the
// looser decision is taken at 1 - (1 - confidence) / siblings (Bonferroni): loosening picks the
// groups that look best on these rows, and without the correction that selection shows on new
// traffic (bench_router_splits: KUAKE-QIC delivered the target in 6 of 10 splits, 9 with it).
ShrinkResult shrink_band(const std::vector<LabelledPrediction>& rows, const Band& parent,
                         double target_precision, std::size_t min_support = 20, double confidence = 0.0,
                         std::size_t siblings = 1);

}  // namespace hengshi::router
