#include "router/threshold_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string_view>

#include <boost/math/distributions/normal.hpp>

namespace hengshi::router {
namespace {

constexpr double kPrecisionEpsilon = 1e-9;  // so 0.97 * 100 answers is met by 97 passes
constexpr double kLowAccuracy = 0.5;        // "right less than half the time"

double clamped_confidence(double confidence) {
  if (std::isnan(confidence)) return 0;
  return std::clamp(confidence, 0.0, 1.0);
}

bool predicts_out_of_scope(const LabelledPrediction& row) {
  return row.predicted_oos || row.intent_predicted == kOutOfScopeIntent;
}

std::size_t bucket_index(double confidence) {
  const auto index = static_cast<std::size_t>(confidence * kFitBuckets);
  return std::min(index, static_cast<std::size_t>(kFitBuckets - 1));
}

// Fixed-point text for notes: decimal(0.9133, 3) == "0.913".
std::string decimal(double value, int digits) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

void append_note(std::string& note, const std::string& text) {
  if (!note.empty()) note += "; ";
  note += text;
}

std::vector<BucketRow> bucket_table(const std::vector<LabelledPrediction>& rows) {
  std::vector<BucketRow> buckets(kFitBuckets);
  std::vector<double> weights(kFitBuckets, 0);
  std::vector<double> answered_weights(kFitBuckets, 0);
  std::vector<double> passes(kFitBuckets, 0);
  double total_weight = 0;
  for (int i = 0; i < kFitBuckets; ++i) {
    buckets[static_cast<std::size_t>(i)].lo = static_cast<double>(i) / kFitBuckets;
    buckets[static_cast<std::size_t>(i)].hi = static_cast<double>(i + 1) / kFitBuckets;
  }
  for (const auto& row : rows) {
    const std::size_t index = bucket_index(clamped_confidence(row.confidence));
    ++buckets[index].samples;
    weights[index] += row.weight;
    total_weight += row.weight;
    if (is_answered(row)) {
      ++buckets[index].answered;
      answered_weights[index] += row.weight;
    }
    if (is_edge_pass(row)) passes[index] += row.weight;
  }
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    auto& bucket = buckets[i];
    bucket.share = total_weight > 0 ? weights[i] / total_weight : 0;
    bucket.pass_rate = answered_weights[i] > 0 ? passes[i] / answered_weights[i] : 0;
  }
  return buckets;
}

// Isotonic (pool-adjacent-violators) fit of "the predicted label is right" on confidence; the
// lowest confidence whose fitted accuracy is >= kLowAccuracy.
double fit_low(const std::vector<LabelledPrediction>& rows) {
  struct Point {
    double confidence;
    bool right;
    double weight;
    bool operator<(const Point& other) const { return confidence < other.confidence; }
  };
  std::vector<Point> points;
  points.reserve(rows.size());
  for (const auto& row : rows) {
    if (!(row.weight > 0)) continue;  // a zero-weight row says nothing, and would divide by 0
    const std::string_view predicted =
        predicts_out_of_scope(row) ? kOutOfScopeIntent : std::string_view(row.intent_predicted);
    points.push_back(
        {clamped_confidence(row.confidence), predicted == row.intent_true, row.weight});
  }
  std::stable_sort(points.begin(), points.end());
  struct Block {
    double min_confidence;
    double right;
    double count;
  };
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < points.size();) {
    // Ties start in one block: a threshold cannot split equal confidences.
    Block block{points[i].confidence, 0, 0};
    for (; i < points.size() && points[i].confidence == block.min_confidence; ++i) {
      block.right += points[i].right ? points[i].weight : 0;
      block.count += points[i].weight;
    }
    blocks.push_back(block);
    while (blocks.size() >= 2) {
      Block& upper = blocks[blocks.size() - 1];
      Block& lower = blocks[blocks.size() - 2];
      if (lower.right / lower.count <= upper.right / upper.count) break;
      lower.right += upper.right;
      lower.count += upper.count;
      blocks.pop_back();
    }
  }
  for (const Block& block : blocks) {
    if (block.right / block.count >= kLowAccuracy) return block.min_confidence;
  }
  return kEdgeNever;
}

void add_to(Tally& tally, const LabelledPrediction& row) {
  ++tally.rows;
  tally.weight += row.weight;
  tally.weight_squared += row.weight * row.weight;
  if (is_edge_pass(row)) tally.pass_weight += row.weight;
}

// Support is an effective sample size, so it is compared with a little slack: with all weights 1
// it is the row count exactly, with equal weights it may be off by a rounding error.
bool meets_support(const Tally& tally, std::size_t min_support) {
  return tally.effective_n() + 1e-9 >= static_cast<double>(min_support);
}

bool meets_target(const Tally& tally, double target_precision) {
  return tally.weight > 0 &&
         tally.pass_weight + kPrecisionEpsilon >= target_precision * tally.weight;
}

double wilson_bound(double proportion, double effective_n, double sign, double confidence);

// confidence > 0: the lower bound of the precision must reach the target; else the point estimate.
bool meets_target(const Tally& tally, double target_precision, double confidence) {
  if (!(confidence > 0)) return meets_target(tally, target_precision);
  return tally.weight > 0 &&
         wilson_bound(tally.precision(), tally.effective_n(), -1, confidence) + kPrecisionEpsilon >= target_precision;
}

// One point per distinct confidence of the answered rows, most confident first, each with the
// tally of the answered rows at or above it: the precision of "answer when confidence >= t".
struct CurvePoint {
  double threshold;
  Tally tally;
};

std::vector<CurvePoint> precision_curve(const std::vector<LabelledPrediction>& rows) {
  std::vector<const LabelledPrediction*> answered;
  for (const auto& row : rows) {
    if (is_answered(row)) answered.push_back(&row);
  }
  std::stable_sort(answered.begin(), answered.end(), [](const auto* a, const auto* b) {
    return clamped_confidence(a->confidence) > clamped_confidence(b->confidence);
  });
  std::vector<CurvePoint> curve;
  Tally running;
  for (std::size_t i = 0; i < answered.size();) {
    const double threshold = clamped_confidence(answered[i]->confidence);
    for (; i < answered.size() && clamped_confidence(answered[i]->confidence) == threshold; ++i) {
      add_to(running, *answered[i]);
    }
    curve.push_back({threshold, running});
  }
  return curve;
}

// "18" for a whole effective sample size, "17.3" otherwise.
std::string count_text(double effective_n) {
  const double rounded = std::round(effective_n);
  return std::abs(effective_n - rounded) < 1e-6 ? decimal(rounded, 0) : decimal(effective_n, 1);
}

double wilson_bound(double proportion, double effective_n, double sign, double confidence) {
  if (!(effective_n > 0)) return sign < 0 ? 0.0 : 1.0;
  // One-sided: z is the standard normal's `confidence` quantile (1.645 at 95%, 1.282 at 90%).
  // In double throughout: Boost promotes to long double by default, which valgrind runs at 64 bits,
  // where erfc_inv overflowed (the release build aborted under callgrind).
  using Normal = boost::math::normal_distribution<
      double, boost::math::policies::policy<boost::math::policies::promote_double<false>>>;
  const double z = boost::math::quantile(Normal(), std::clamp(confidence, 0.5, 0.999999));
  const double p = std::clamp(proportion, 0.0, 1.0);
  const double n = effective_n;
  const double centre = p + z * z / (2 * n);
  const double spread = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n));
  return std::clamp((centre + sign * spread) / (1 + z * z / n), 0.0, 1.0);
}

}  // namespace

bool is_answered(const LabelledPrediction& row) { return !predicts_out_of_scope(row); }

bool is_edge_pass(const LabelledPrediction& row) {
  return is_answered(row) && row.intent_true != kOutOfScopeIntent &&
         row.intent_predicted == row.intent_true;
}

FitResult fit_band(const std::vector<LabelledPrediction>& rows, double target_precision,
                   std::size_t min_support, double confidence) {
  FitResult result;
  result.samples = rows.size();
  result.buckets = bucket_table(rows);

  double total_weight = 0;
  for (const auto& row : rows) total_weight += row.weight;
  const std::vector<CurvePoint> curve = precision_curve(rows);
  for (const CurvePoint& point : curve) {
    if (meets_support(point.tally, min_support) && meets_target(point.tally, target_precision)) {
      result.point_high = point.threshold;  // the lowest the point estimate alone would take
    }
    if (meets_support(point.tally, min_support) && meets_target(point.tally, target_precision, confidence)) {
      // Lower thresholds come later, so the last one that qualifies is the lowest.
      result.reachable = true;
      result.high = point.threshold;
      result.precision_at_high = point.tally.precision();
      result.coverage_at_high = total_weight > 0 ? point.tally.weight / total_weight : 0;
    }
  }
  const std::size_t answered_rows = curve.empty() ? 0 : curve.back().tally.rows;
  if (result.reachable && result.high > result.point_high) {
    append_note(result.note, "bound: the " + decimal(100 * confidence, 0) + "% lower bound of precision raised high from " +
                                 decimal(result.point_high, 4) + " (point estimate) to " + decimal(result.high, 4));
  }
  if (!result.reachable) {
    result.high = kEdgeNever;
    append_note(result.note, "unreachable: no threshold reaches precision " +
                                 decimal(target_precision, 3) +
                                 " with >= " + std::to_string(min_support) + " answers (of " +
                                 std::to_string(answered_rows) + "); high = 1.01 (edge disabled)");
  }

  // Monotonicity over supported buckets, top down (the rule is in the header).
  std::vector<const BucketRow*> supported;
  for (auto it = result.buckets.rbegin(); it != result.buckets.rend(); ++it) {
    if (it->answered >= min_support) supported.push_back(&*it);
  }
  for (std::size_t i = 0; i + 1 < supported.size(); ++i) {
    const BucketRow& upper = *supported[i];
    const BucketRow& lower = *supported[i + 1];
    if (upper.pass_rate >= lower.pass_rate - kMonotonicTolerance) continue;
    result.monotonic = false;
    const bool top = i == 0;
    std::string text = std::string("non_monotonic: ") + (top ? "top bucket" : "bucket") + " [" +
                       decimal(upper.lo, 1) + ", " + decimal(upper.hi, 1) + "] pass rate " +
                       decimal(upper.pass_rate, 3) + " < " + decimal(lower.pass_rate, 3) + " below";
    if (top && upper.pass_rate < target_precision) {
      text += ", under target " + decimal(target_precision, 3) +
              (result.high < kEdgeNever ? "; high raised to 1.01 (edge disabled)"
                                        : "; edge stays disabled");
      result.high = kEdgeNever;
    } else {
      text += "; threshold kept";
    }
    append_note(result.note, text);
  }
  if (result.high >= kEdgeNever) {
    result.precision_at_high = 0;
    result.coverage_at_high = 0;
  }

  result.low = rows.size() < min_support ? kLowAccuracy : fit_low(rows);
  result.low = std::min(result.low, result.high);
  return result;
}

Tally answered_at_or_above(const std::vector<LabelledPrediction>& rows, double threshold) {
  Tally tally;
  for (const auto& row : rows) {
    if (is_answered(row) && clamped_confidence(row.confidence) >= threshold) add_to(tally, row);
  }
  return tally;
}

double wilson_lower_bound(double proportion, double effective_n, double confidence) {
  return wilson_bound(proportion, effective_n, -1, confidence);
}

double wilson_upper_bound(double proportion, double effective_n, double confidence) {
  return wilson_bound(proportion, effective_n, +1, confidence);
}

double oos_share_of(const std::vector<LabelledPrediction>& rows) {
  double total = 0;
  double out_of_scope = 0;
  for (const auto& row : rows) {
    total += row.weight;
    if (row.intent_true == kOutOfScopeIntent) out_of_scope += row.weight;
  }
  return total > 0 ? out_of_scope / total : 0;
}

Status reweight_to_oos_share(std::vector<LabelledPrediction>& rows, double oos_share) {
  if (!(oos_share >= 0 && oos_share < 1)) {
    return Error{"invalid_argument",
                 "out-of-scope share must be in [0, 1) (got " + decimal(oos_share, 3) + ")"};
  }
  std::size_t out_of_scope = 0;
  for (const auto& row : rows) out_of_scope += row.intent_true == kOutOfScopeIntent ? 1 : 0;
  if (out_of_scope == rows.size()) {
    return Error{"invalid_argument", "no in-scope rows: nothing to calibrate the edge on"};
  }
  if (out_of_scope == 0 && oos_share > 0) {
    return Error{"invalid_argument",
                 "out-of-scope share " + decimal(oos_share, 3) +
                     " needs out-of-scope rows to reweight, and the calibration data has none "
                     "(no row with intent \"" +
                     std::string(kOutOfScopeIntent) +
                     "\"): add labelled out-of-scope rows, or leave the share unset"};
  }
  const double data_share = static_cast<double>(out_of_scope) / static_cast<double>(rows.size());
  const double oos_weight = out_of_scope == 0 ? 1 : oos_share / data_share;
  const double in_scope_weight = (1 - oos_share) / (1 - data_share);
  for (auto& row : rows) {
    row.weight = row.intent_true == kOutOfScopeIntent ? oos_weight : in_scope_weight;
  }
  return Ok{};
}

Status reweight_to_intent_prior(std::vector<LabelledPrediction>& rows, const IntentPrior& prior) {
  for (const auto& [intent, share] : prior) {
    if (!(share >= 0) || !std::isfinite(share)) {
      return Error{"invalid_argument", "intent prior: the share of \"" + intent + "\" must be a finite number >= 0"};
    }
  }
  // Each intent's current in-scope weight, and the prior's mass over the intents the rows hold.
  std::map<std::string, double> weight_of;
  double in_scope = 0;
  for (const auto& row : rows) {
    if (row.intent_true == kOutOfScopeIntent) continue;
    weight_of[row.intent_true] += row.weight;
    in_scope += row.weight;
  }
  double mass = 0;
  for (const auto& [intent, weight] : weight_of) {
    const auto it = prior.find(intent);
    if (it != prior.end() && weight > 0) mass += it->second;
  }
  if (!(mass > 0)) {
    return Error{"invalid_argument", "intent prior: no in-scope row has an intent the prior gives a share"};
  }
  for (auto& row : rows) {
    if (row.intent_true == kOutOfScopeIntent) continue;
    const auto it = prior.find(row.intent_true);
    const double share = it == prior.end() ? 0 : it->second / mass;
    const double intent_weight = weight_of[row.intent_true];
    row.weight = intent_weight > 0 ? row.weight * share * in_scope / intent_weight : 0;
  }
  return Ok{};
}

std::string_view to_string(BandRule rule) {
  switch (rule) {
    case BandRule::fitted:
      return "fitted";
    case BandRule::inherited_too_few:
    case BandRule::inherited_consistent:
      return "inherited";
    case BandRule::stricter:
      return "stricter";
    case BandRule::looser:
      return "looser";
  }
  return "inherited";
}

ShrinkResult shrink_band(const std::vector<LabelledPrediction>& rows, const Band& parent,
                         double target_precision, std::size_t min_support, double confidence,
                         std::size_t siblings) {
  ShrinkResult result;
  result.fit = fit_band(rows, target_precision, min_support, confidence);
  const double level = confidence > 0 ? confidence : 0.95;  // the Wilson bounds' level
  // Loosening is a claim about new traffic made by whichever of the siblings look best on these
  // rows: with bounds, its level is Bonferroni-corrected over them, so all the groups' loosenings
  // together hold at `confidence`.
  const double looser_level =
      confidence > 0 ? 1.0 - (1.0 - confidence) / static_cast<double>(std::max<std::size_t>(siblings, 1)) : level;
  result.band = parent;
  const std::vector<CurvePoint> curve = precision_curve(rows);
  result.at_parent_high = answered_at_or_above(rows, parent.high);
  const double own_low = rows.size() >= min_support ? result.fit.low : parent.low;
  const auto own_band = [&](double high) { return Band{high, std::min(own_low, high)}; };
  const std::string target = decimal(target_precision, 3);
  const std::string parent_high = decimal(parent.high, 3);

  const Tally& at_parent = result.at_parent_high;
  const double upper = wilson_upper_bound(at_parent.precision(), at_parent.effective_n(), level);
  if (at_parent.weight > 0 && upper < target_precision) {
    // Shown below target where the parent would answer: answer only where its own rows meet it.
    const CurvePoint* raised = nullptr;
    for (const CurvePoint& point : curve) {
      if (point.threshold > parent.high && meets_target(point.tally, target_precision, confidence)) {
        raised = &point;  // lower thresholds come later: the last is the lowest
      }
    }
    result.rule = BandRule::stricter;
    result.band = own_band(raised != nullptr ? raised->threshold : kEdgeNever);
    result.reason = "stricter: Wilson upper " + decimal(upper, 3) + " < " + target +
                    " at parent high " + parent_high + " (precision " +
                    decimal(at_parent.precision(), 3) +
                    ", n=" + count_text(at_parent.effective_n()) + "); ";
    result.reason += raised != nullptr
                         ? "high " + decimal(raised->threshold, 3) + " where its precision is " +
                               decimal(raised->tally.precision(), 3) +
                               " (n=" + count_text(raised->tally.effective_n()) + ")"
                         : "no higher threshold reaches the target: high 1.01 (edge never)";
  } else {
    const CurvePoint* lowered = nullptr;
    double lowered_bound = 0;
    for (const CurvePoint& point : curve) {
      if (point.threshold >= parent.high || !meets_support(point.tally, min_support)) continue;
      const double lower = wilson_lower_bound(point.tally.precision(), point.tally.effective_n(), looser_level);
      if (lower >= target_precision) {
        lowered = &point;
        lowered_bound = lower;
      }
    }
    const std::string at_parent_text =
        at_parent.weight > 0 ? "precision " + decimal(at_parent.precision(), 3) +
                                   ", Wilson upper " + decimal(upper, 3) + " at parent high " +
                                   parent_high + ", n=" + count_text(at_parent.effective_n())
                             : "no answers at parent high " + parent_high;
    if (lowered != nullptr) {
      result.rule = BandRule::looser;
      result.band = own_band(lowered->threshold);
      result.reason =
          "looser: Wilson lower " + decimal(lowered_bound, 3) + " (at " + decimal(100 * looser_level, 2) +
          "%) >= " + target + " at " +
          decimal(lowered->threshold, 3) + " (precision " + decimal(lowered->tally.precision(), 3) +
          ", n=" + count_text(lowered->tally.effective_n()) + "; parent high " + parent_high + ")";
    } else if (rows.size() < min_support) {
      result.rule = BandRule::inherited_too_few;
      result.reason = "inherited: n=" + std::to_string(rows.size()) + " too few (min support " +
                      std::to_string(min_support) + "); " + at_parent_text;
    } else {
      result.rule = BandRule::inherited_consistent;
      result.reason = "inherited: evidence consistent with parent (" + at_parent_text + ")";
    }
  }

  const Tally at_high = answered_at_or_above(rows, result.band.high);
  double total_weight = 0;
  for (const auto& row : rows) total_weight += row.weight;
  result.precision_at_high = at_high.precision();
  result.coverage_at_high = total_weight > 0 ? at_high.weight / total_weight : 0;
  return result;
}

}  // namespace hengshi::router
