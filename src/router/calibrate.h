// `hengshi calibrate`: runs an intent model over labelled rows and fits the confidence bands of a
// thresholds file (thresholds.h): the default band on all rows with fit_band (threshold_fit.h),
// then the task types, predicted intents and task type × intent groups. Two rules:
//  - hierarchical (the default): each group shrinks toward its parent (shrink_band): it keeps the
//    parent's band, and gets no entry in the file, unless its own rows show it below target
//    (stricter) or above target lower down (looser) with 95% Wilson confidence. Parents: the
//    default for task types and intents; for task type × intent, the band the lookup would use
//    without it (Thresholds::band precedence): the intent's if written, else the task type's,
//    else the default. Task type × intent groups are fitted only for intents seen under more than
//    one task type (otherwise they are the intent group again).
//  - per_group_legacy (the rule before issue 10, kept for comparison): fit_band per group with
//    >= min_support rows, looser than the default only with a Wilson lower bound over target;
//    thin groups could switch the edge off (high 1.01) on 20 rows.
// Rows may be reweighted to another out-of-scope share first (prior shift, options.oos_share).
// After fitting, the whole policy is applied back to the rows (final_policy) and to 5/10/20/30%
// out-of-scope shares (shift), so the operator sees the policy, not only its parts.
//
// Pure functions over values; the engine is only read (IntentEngine::predict is thread-safe).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "edge/intent_engine.h"
#include "router/threshold_fit.h"
#include "router/thresholds.h"

namespace hengshi::router {

// One labelled row: JSON Lines {"text", "intent", "task_type"?}; intent "__oos__" = out of scope.
struct CalibrationRow {
  std::string text;
  std::string intent;     // the true intent
  std::string task_type;  // empty when the row has none (CalibrateOptions::default_task_type)
};

enum class ThresholdRule { hierarchical, per_group_legacy };
std::string_view to_string(ThresholdRule rule);  // "hierarchical" | "per_group_legacy"

struct CalibrateOptions {
  double target_precision = 0.97;  // edge precision each band's `high` must reach, in (0, 1]
  std::size_t min_support = 20;    // rows a group needs for a band of its own, and answers at high
  std::string default_task_type = "faq";  // task type of rows without one
  ThresholdRule rule = ThresholdRule::hierarchical;
  // The out-of-scope share of the traffic the thresholds are for, in [0, 1): rows are reweighted
  // to it (reweight_to_oos_share) before fitting. Unset = the calibration data's own share.
  std::optional<double> oos_share;
  // With oos_share > 0 and no __oos__ row in the calibration data: stand in for out-of-scope
  // questions with the model's synthetic rows (held-out intents, edge::SyntheticOosRow), under
  // the default task type. Off, or a model without them: such a share is refused.
  bool synthetic_oos = true;
  // At most this share of the out-of-scope rows (real or stand-ins) may clear their band: every
  // band's high is then raised to one floor, the least that keeps it. Unset = precision only.
  std::optional<double> max_oos_leak;
  // Bands and the leak cap hold on new traffic, not only on these rows: a band's precision must
  // reach the target with its one-sided Wilson LOWER bound at this confidence (Kish's effective
  // n under the oos_share weights), the leak stay under max_oos_leak with its UPPER bound, and
  // the shrinkage decides on bounds at this level. 0 = the point estimates (95% bounds for the
  // shrinkage): what calibrate did before.
  double confidence = 0.9;
  // The in-scope traffic's mix over intents (traffic_intent_prior: the engine's predictions on
  // logged questions). The predicted-intent groups (and task type × intent) are judged on rows
  // reweighted to it after the out-of-scope share (reweight_to_intent_prior): a rare intent that
  // popular questions are mistaken for turns stricter. The default and task-type bands keep the
  // rows' own mix. The final policy's figures are for the traffic's mix. Empty = the rows' mix.
  IntentPrior intent_prior;
  // Timestamp of the thresholds version; unset = the system clock (set in tests for stable output).
  std::optional<std::chrono::system_clock::time_point> now;
};

struct GroupFit {
  std::string kind;  // "default" | "task_type" | "intent" | "task_intent"
  std::string key;   // task type, intent or "task/intent"; empty for "default"
  FitResult fit;     // fit_band of the group's rows alone (its buckets are the table's)
  // The group's band: written to the file unless `written` is false (inherited: the parent's
  // band, which the lookup falls back to). Legacy: the fit's, kept at the default's high when
  // the group's own rows cannot show the target precision (95% Wilson lower bound).
  Band band;
  bool written = true;
  BandRule rule = BandRule::fitted;  // legacy groups are all "fitted"
  std::string parent;                // the parent group's name; empty for the default
  std::string reason;                // which rule set the band, one line (hierarchical)
  double precision_at_high = 0;      // the group's (weighted) precision at band.high
  double coverage_at_high = 0;       // the group's (weighted) share answered at band.high
};

// A group without a band of its own in the file: it inherits. Legacy: fewer than min_support
// rows; hierarchical: every group whose rule is inherited.
struct InheritedGroup {
  std::string kind;  // "task_type" | "intent" | "task_intent"
  std::string key;
  std::size_t samples = 0;
};

// The whole policy applied to labelled rows: the edge answers a row when the model predicts it
// in scope, the predicted intent has a canned answer, and its confidence reaches the high of the
// band Thresholds::band picks for it (decide()'s own conditions).
struct PolicyFigures {
  double oos_share = 0;          // out-of-scope share of the traffic the figures are for
  double coverage = 0;           // share of the traffic the edge answers
  double precision = 0;          // edge passes / edge answers; 0 when it answers nothing
  double oos_leak = 0;           // share of out-of-scope traffic the edge answers
  double in_scope_coverage = 0;  // share of in-scope traffic the edge answers
  std::size_t answered = 0;      // rows the edge answers (a count, not reweighted)
  std::size_t out_of_scope_rows = 0;  // the leak's sample count
  double precision_effective_n = 0;   // Kish's n of the answered rows under the share's weights
};

// Applies `thresholds` to `rows` (their weights are ignored) and reweights the two populations
// to `oos_share` (unset: the rows' own out-of-scope share): with c = in-scope coverage, q = the
// in-scope rows' pass share, L = leak, S = share, coverage = (1-S)c + S*L and precision =
// (1-S)q / coverage. Rows without out-of-scope examples have leak 0.
// With `intent_prior` (non-empty), in-scope rows weigh by their intent's share over its row count
// (reweight_to_intent_prior), so c and q are the traffic's, and Kish's n counts those weights.
PolicyFigures evaluate_policy(const Thresholds& thresholds,
                              const std::vector<LabelledPrediction>& rows,
                              std::optional<double> oos_share = std::nullopt,
                              const IntentPrior& intent_prior = {});

inline constexpr double kShiftShares[] = {0.05, 0.10, 0.20, 0.30};  // the report's shift table

struct CalibrateReport {
  ThresholdsFile file;  // validated; ready for write_thresholds_file
  // Default first, then task types, intents and task type × intent groups (each sorted).
  // Legacy: only the groups with >= min_support rows; hierarchical: every group.
  std::vector<GroupFit> groups;
  std::vector<InheritedGroup> inherited;
  std::size_t rows = 0;         // rows predicted and fitted
  std::size_t skipped = 0;      // rows with an empty text or intent, left out
  // Of `rows`, those predicted out of fold from the model's own training data (--cross-fit).
  std::size_t cross_fit_rows = 0;
  int cross_fit_folds = 0;
  std::size_t min_support = 0;  // the option the groups were cut with
  double confidence = 0;        // the option the bands were bounded with (0 = point estimates)
  ThresholdRule rule = ThresholdRule::hierarchical;
  double data_oos_share = 0;   // the calibration rows' own out-of-scope share
  std::size_t synthetic_oos_rows = 0;  // stand-in out-of-scope rows fitted with (see options)
  // With max_oos_leak: the leak of the bands as fitted, and the floor put under every band's
  // high when that leak was over the maximum (unset when it was not).
  double leak_before_cap = 0;
  std::optional<double> leak_floor;
  double oos_share = 0;        // the share the rows were weighted to (= data_oos_share if unset)
  std::size_t intent_prior_intents = 0;  // intents of the prior fitted for; 0 = the rows' own mix
  PolicyFigures final_policy;  // the written policy on the rows, at oos_share
  // The same at kShiftShares; empty without out-of-scope rows (real or synthetic).
  std::vector<PolicyFigures> shift;
};

// Predicts every row with `engine` and fits the bands. A per-intent group holds the rows whose
// PREDICTED intent (in scope) is that intent, since that is what its band gates at serve time.
// An unreachable fit gives high = kEdgeNever (1.01) for its group. file.notes holds each group's
// note or rule, keyed "default", "task_type/<name>", "intent/<name>", "task_intent/<t>/<i>", and
// "oos_share" (the share fitted for, "%.3f") and "calibration" (rule, shares, min support): the
// file format is unchanged. file.model_version = engine.model_version(); file.version from
// make_thresholds_version.
// Errors: "invalid_argument" (target_precision not in (0, 1], min_support 0, empty
// default_task_type, oos_share not in [0, 1) or set > 0 with no out-of-scope rows, real or
// synthetic),
// "data_invalid" (no usable rows).
// The out-of-scope share of the rows themselves: __oos__ rows among those that are not the
// model's stand-ins (0 without any). The share a fit is for when none is given.
double own_oos_share(const std::vector<LabelledPrediction>& rows);

// The intent mix of recent traffic as `engine` sees it: each question's predicted in-scope intent
// counts once, and every label of the model one more (add-one smoothing, so an intent the sample
// missed keeps a little weight). Predicted, not true, intents: the model's confusions blur the
// mix a little toward their targets, which errs on the careful side for the intents confused into.
struct TrafficPrior {
  IntentPrior prior;            // label -> count + 1; empty when `questions` is empty
  std::size_t questions = 0;    // non-blank questions predicted
  std::size_t in_scope = 0;     // of them, predicted in scope
  std::size_t intents_seen = 0; // labels predicted at least once
};
TrafficPrior traffic_intent_prior(const edge::IntentEngine& engine, const std::vector<std::string>& questions);

// One calibration row as the fit reads it: the engine's prediction of a row whose truth is known.
LabelledPrediction labelled_prediction(const edge::IntentPrediction& prediction, std::string task_type,
                                       std::string intent_true);

// `out_of_fold`: more evidence, predicted by fold models of the engine's own recipe
// (edge/cross_fit.h; their task type is the default), fitted together with `rows`.
Result<CalibrateReport> calibrate_thresholds(const edge::IntentEngine& engine,
                                             const std::vector<CalibrationRow>& rows,
                                             const CalibrateOptions& options,
                                             std::vector<LabelledPrediction> out_of_fold = {},
                                             int folds = 0);

// The fitting itself, over predictions already made (calibrate_thresholds predicts, then calls
// this; tests and benches may call it directly). The rows' weights are replaced (set from
// options.oos_share). Same errors ("data_invalid": no rows); rows = rows.size(), skipped = 0;
// file.model_version is left empty, file.version is made from options.now.
Result<CalibrateReport> calibrate_predictions(std::vector<LabelledPrediction> rows,
                                              const CalibrateOptions& options);

// Reads JSON Lines rows; other fields (e.g. "answer") are ignored and blank lines skipped. Errors
// (code "data_invalid") are "<path>:<line>: why" (or "<path>: why"): unreadable or empty file,
// invalid JSON, a row that is not an object, "text"/"intent" missing, not a string or empty,
// "task_type" present but not a non-empty string.
Result<std::vector<CalibrationRow>> read_calibration_rows(const std::string& path);

// The table `hengshi calibrate` prints: per group its buckets (confidence range, share of the
// group's samples, answered, edge pass rate; empty buckets left out), then the chosen high/low,
// precision and coverage at high, the monotonic flag and the fit's note; then inherited groups.
// Hierarchical: buckets for the default and every group with a band of its own,
// then one row per group (rows, band, rule and why); then the final policy and the shift table.
std::string format_calibrate_report(const CalibrateReport& report);

}  // namespace hengshi::router
