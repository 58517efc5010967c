#include "router/threshold_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "router/thresholds.h"

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
  std::vector<std::size_t> passes(kFitBuckets, 0);
  for (int i = 0; i < kFitBuckets; ++i) {
    buckets[static_cast<std::size_t>(i)].lo = static_cast<double>(i) / kFitBuckets;
    buckets[static_cast<std::size_t>(i)].hi = static_cast<double>(i + 1) / kFitBuckets;
  }
  for (const auto& row : rows) {
    const std::size_t index = bucket_index(clamped_confidence(row.confidence));
    ++buckets[index].samples;
    if (is_answered(row)) ++buckets[index].answered;
    if (is_edge_pass(row)) ++passes[index];
  }
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    auto& bucket = buckets[i];
    bucket.share = rows.empty() ? 0 : static_cast<double>(bucket.samples) / rows.size();
    bucket.pass_rate = bucket.answered == 0 ? 0 : static_cast<double>(passes[i]) / bucket.answered;
  }
  return buckets;
}

// Isotonic (pool-adjacent-violators) fit of "the predicted label is right" on confidence; the
// lowest confidence whose fitted accuracy is >= kLowAccuracy.
double fit_low(const std::vector<LabelledPrediction>& rows) {
  std::vector<std::pair<double, bool>> points;
  points.reserve(rows.size());
  for (const auto& row : rows) {
    const std::string_view predicted =
        predicts_out_of_scope(row) ? kOutOfScopeIntent : std::string_view(row.intent_predicted);
    points.emplace_back(clamped_confidence(row.confidence), predicted == row.intent_true);
  }
  std::sort(points.begin(), points.end());
  struct Block {
    double min_confidence;
    double right;
    double count;
  };
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < points.size();) {
    // Ties start in one block: a threshold cannot split equal confidences.
    Block block{points[i].first, 0, 0};
    for (; i < points.size() && points[i].first == block.min_confidence; ++i) {
      block.right += points[i].second ? 1 : 0;
      block.count += 1;
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

}  // namespace

bool is_answered(const LabelledPrediction& row) { return !predicts_out_of_scope(row); }

bool is_edge_pass(const LabelledPrediction& row) {
  return is_answered(row) && row.intent_true != kOutOfScopeIntent &&
         row.intent_predicted == row.intent_true;
}

FitResult fit_band(const std::vector<LabelledPrediction>& rows, double target_precision,
                   std::size_t min_support) {
  FitResult result;
  result.samples = rows.size();
  result.buckets = bucket_table(rows);

  // Answered predictions, most confident first; cumulative counts give the precision of
  // "answer when confidence >= t" at each distinct t.
  std::vector<std::pair<double, bool>> answered;
  for (const auto& row : rows) {
    if (is_answered(row)) {
      answered.emplace_back(clamped_confidence(row.confidence), is_edge_pass(row));
    }
  }
  std::sort(answered.begin(), answered.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::size_t count = 0;
  std::size_t passes = 0;
  for (std::size_t i = 0; i < answered.size();) {
    const double threshold = answered[i].first;
    for (; i < answered.size() && answered[i].first == threshold; ++i) {
      ++count;
      if (answered[i].second) ++passes;
    }
    const double precision = static_cast<double>(passes) / count;
    if (count >= min_support &&
        static_cast<double>(passes) + kPrecisionEpsilon >= target_precision * count) {
      // Lower thresholds come later, so the last one that qualifies is the lowest.
      result.reachable = true;
      result.high = threshold;
      result.precision_at_high = precision;
      result.coverage_at_high = static_cast<double>(count) / rows.size();
    }
  }
  if (!result.reachable) {
    result.high = kEdgeNever;
    append_note(result.note,
                "unreachable: no threshold reaches precision " + decimal(target_precision, 3) +
                    " with >= " + std::to_string(min_support) + " answers (of " +
                    std::to_string(answered.size()) + "); high = 1.01 (edge disabled)");
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

}  // namespace hengshi::router
