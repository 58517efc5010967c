#include "router/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "core/progress.h"
#include "core/json_lines.h"
#include "edge/oos_score.h"

namespace hengshi::router {
namespace {

constexpr std::size_t kReportColumns = 100;  // the inherited-group list wraps at this width

// The key of a group in file.notes and in the printed report.
std::string group_name(std::string_view kind, std::string_view key) {
  if (kind == "default") return "default";
  return std::string(kind) + "/" + std::string(key);
}

// fit_band already gives kEdgeNever when unreachable; restated here because it is the rule the
// thresholds file depends on, and low must stay <= high for validate_thresholds.
Band band_of(const FitResult& fit) {
  Band band;
  band.high = fit.reachable ? fit.high : kEdgeNever;
  band.low = std::min(fit.low, band.high);
  return band;
}

// Legacy rule: fits a group's rows, or records it as inherited when it has too few. Returns the
// band to write. A group may be stricter than `floor` freely, but looser only when its own rows
// show the target with 95% confidence (Wilson): 20 of 20 right is consistent with a true
// precision near 0.88, and bench/router measured small intent groups with loose bands missing
// the target on unseen data.
std::optional<Band> fit_group_legacy(std::string_view kind, const std::string& key,
                                     const std::vector<LabelledPrediction>& rows,
                                     const CalibrateOptions& options, CalibrateReport& report,
                                     const Band* floor = nullptr) {
  const std::string name = group_name(kind, key);
  if (rows.size() < options.min_support) {
    report.inherited.push_back(InheritedGroup{std::string(kind), key, rows.size()});
    report.file.notes[name] = "inherited: " + std::to_string(rows.size()) + " rows < min_support " +
                              std::to_string(options.min_support) + "; no band of its own";
    return std::nullopt;
  }
  GroupFit group{std::string(kind), key,
                 fit_band(rows, options.target_precision, options.min_support, options.confidence)};
  if (!group.fit.note.empty()) report.file.notes[name] = group.fit.note;
  Band band = band_of(group.fit);
  if (floor != nullptr && band.high < floor->high) {
    const Tally above = answered_at_or_above(rows, band.high);
    const double bound = wilson_lower_bound(above.precision(), above.effective_n());
    if (bound < options.target_precision) {
      char note[200];
      std::snprintf(note, sizeof note,
                    "high %.3f kept at the default %.3f: %.0f/%.0f right above it shows only %.3f "
                    "(95%% Wilson lower bound) < target %.2f",
                    band.high, floor->high, above.pass_weight, above.weight, bound,
                    options.target_precision);
      report.file.notes[name] = note;
      group.fit.note = note;
      band.high = floor->high;
      band.low = std::min(band.low, band.high);
    }
  }
  group.band = band;
  group.reason = group.fit.note;
  const Tally at_high = answered_at_or_above(rows, band.high);
  double total_weight = 0;
  for (const auto& row : rows) total_weight += row.weight;
  group.precision_at_high = at_high.precision();
  group.coverage_at_high = total_weight > 0 ? at_high.weight / total_weight : 0;
  report.groups.push_back(std::move(group));
  return band;
}

// Hierarchical rule: shrinks a group toward its parent's band (shrink_band). Returns the band
// to write, or nullopt when the group inherits (the lookup then falls back to the parent).
std::optional<Band> fit_group_shrunk(std::string_view kind, const std::string& key,
                                     const std::vector<LabelledPrediction>& rows,
                                     const std::string& parent_name, const Band& parent,
                                     std::size_t siblings, const CalibrateOptions& options,
                                     CalibrateReport& report) {
  const std::string name = group_name(kind, key);
  ShrinkResult shrunk = shrink_band(rows, parent, options.target_precision, options.min_support,
                                    options.confidence, siblings);
  GroupFit group{std::string(kind), key, std::move(shrunk.fit)};
  group.band = shrunk.band;
  group.written = !is_inherited(shrunk.rule);
  group.rule = shrunk.rule;
  group.parent = parent_name;
  group.reason = shrunk.reason;
  group.precision_at_high = shrunk.precision_at_high;
  group.coverage_at_high = shrunk.coverage_at_high;
  report.file.notes[name] = shrunk.reason;
  if (!group.written) {
    report.inherited.push_back(InheritedGroup{std::string(kind), key, rows.size()});
  }
  report.groups.push_back(std::move(group));
  if (is_inherited(shrunk.rule)) return std::nullopt;
  return shrunk.band;
}

[[gnu::format(printf, 2, 3)]] void append_format(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list measure;
  va_copy(measure, args);
  const int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  if (length > 0) {
    const std::size_t start = out.size();
    out.resize(start + static_cast<std::size_t>(length) + 1);  // vsnprintf writes the NUL too
    std::vsnprintf(out.data() + start, static_cast<std::size_t>(length) + 1, format, args);
    out.pop_back();
  }
  va_end(args);
}

void append_group(std::string& out, const GroupFit& group, bool hierarchical) {
  const FitResult& fit = group.fit;
  append_format(out, "\n%s: %zu samples\n", group_name(group.kind, group.key).c_str(), fit.samples);
  append_format(out, "  %-12s %7s %9s %10s\n", "confidence", "share", "answered", "pass rate");
  for (std::size_t i = 0; i < fit.buckets.size(); ++i) {
    const BucketRow& bucket = fit.buckets[i];
    if (bucket.samples == 0) continue;
    const bool last = i + 1 == fit.buckets.size();
    char range[32];
    std::snprintf(range, sizeof range, "[%.1f, %.1f%c", bucket.lo, bucket.hi, last ? ']' : ')');
    char pass_rate[16] = "-";
    if (bucket.answered > 0) std::snprintf(pass_rate, sizeof pass_rate, "%.3f", bucket.pass_rate);
    append_format(out, "  %-12s %7.3f %9zu %10s\n", range, bucket.share, bucket.answered,
                  pass_rate);
  }
  const Band band = group.band;
  if (band.high >= kEdgeNever) {
    append_format(out, "  high %.2f (edge never)  low %.3f  ", band.high, band.low);
  } else {
    append_format(out, "  high %.3f  low %.3f  ", band.high, band.low);
  }
  append_format(out, "precision@high %.3f  coverage@high %.3f  monotonic %s\n",
                group.precision_at_high, group.coverage_at_high, fit.monotonic ? "yes" : "no");
  if (hierarchical) {
    append_format(out, "  rule: %s\n", group.reason.c_str());
  } else if (!fit.note.empty()) {
    append_format(out, "  note: %s\n", fit.note.c_str());
  }
}

// One line per group: what the router will use for its rows and which rule said so.
void append_rule_table(std::string& out, const CalibrateReport& report) {
  append_format(out, "\ngroups (%zu; band = what the router uses for the group's rows):\n",
                report.groups.size());
  append_format(out, "  %-40s %6s %6s %6s  %s\n", "group", "rows", "high", "low", "rule");
  for (const GroupFit& group : report.groups) {
    const std::string name = group_name(group.kind, group.key);
    append_format(out, "  %-40s %6zu %6.3f %6.3f  %s\n", name.c_str(), group.fit.samples,
                  group.band.high, group.band.low, group.reason.c_str());
  }
}

void append_policy(std::string& out, const CalibrateReport& report) {
  const PolicyFigures& policy = report.final_policy;
  append_format(out,
                "\nfinal policy on the calibration rows (out-of-scope share %.3f; data %.3f):\n"
                "  edge coverage %.3f  precision %.3f  out-of-scope leak %.3f  in-scope "
                "coverage %.3f  (%zu of %zu rows answered)\n",
                report.oos_share, report.data_oos_share, policy.coverage, policy.precision,
                policy.oos_leak, policy.in_scope_coverage, policy.answered, report.rows);
  if (report.confidence > 0) {
    const double c = report.confidence;
    const double n = policy.precision_effective_n;
    const auto oos = static_cast<double>(policy.out_of_scope_rows);
    append_format(out,
                  "  on new traffic, at %.0f%% confidence: precision >= %.3f (n=%.0f effective), "
                  "out-of-scope leak <= %.3f (n=%zu); two-sided: precision [%.3f, %.3f], leak [%.3f, %.3f]\n",
                  100 * c, wilson_lower_bound(policy.precision, n, c), n,
                  oos > 0 ? wilson_upper_bound(policy.oos_leak, oos, c) : 0.0, policy.out_of_scope_rows,
                  wilson_lower_bound(policy.precision, n, (1 + c) / 2), wilson_upper_bound(policy.precision, n, (1 + c) / 2),
                  oos > 0 ? wilson_lower_bound(policy.oos_leak, oos, (1 + c) / 2) : 0.0,
                  oos > 0 ? wilson_upper_bound(policy.oos_leak, oos, (1 + c) / 2) : 0.0);
    std::string stricter;
    for (const GroupFit& group : report.groups) {
      if (group.fit.reachable && group.fit.high > group.fit.point_high && group.band.high >= group.fit.high) {
        stricter += (stricter.empty() ? "" : ", ") + group_name(group.kind, group.key);
      }
    }
    append_format(out, "  made stricter by the bound (against the point estimate): %s\n",
                  stricter.empty() ? "none" : stricter.c_str());
  } else {
    out += "  --confidence 0: bands on point estimates, which hold on these rows, not necessarily on new traffic\n";
  }
  if (report.leak_floor) {
    append_format(out,
                  "  leak capped: every band's high raised to at least %.4f (out-of-scope leak "
                  "%.3f before)\n",
                  *report.leak_floor, report.leak_before_cap);
  }
  if (report.intent_prior_intents > 0) {
    append_format(out,
                  "  intents: in-scope rows weighted to the traffic's mix over %zu intents (figures "
                  "above are for that mix)\n",
                  report.intent_prior_intents);
  }
  if (report.synthetic_oos_rows > 0) {
    append_format(out,
                  "  out of scope: the data has none, so %zu stand-in rows from the model's "
                  "held-out intents (hengshi train) were weighted to %.3f\n",
                  report.synthetic_oos_rows, report.oos_share);
  }
  if (report.shift.empty()) {
    out += "  prior shift: no out-of-scope rows, so the leak under shift cannot be measured\n";
    return;
  }
  append_format(out,
                "\nprior shift (the final policy, rows reweighted to each share; target %.3f):\n",
                report.file.target_precision);
  append_format(out, "  %-9s %9s %9s %9s\n", "oos share", "precision", "coverage", "oos leak");
  for (const PolicyFigures& shifted : report.shift) {
    append_format(out, "  %-9.2f %9.3f %9.3f %9.3f%s\n", shifted.oos_share, shifted.precision,
                  shifted.coverage, shifted.oos_leak,
                  shifted.precision + 1e-9 < report.file.target_precision ? "  < target" : "");
  }
}

// decide()'s own conditions for an edge answer, applied to a labelled row.
bool policy_answers(const Thresholds& thresholds, const LabelledPrediction& row) {
  return is_answered(row) && row.has_answer &&
         thresholds.classify(row.confidence, row.task_type, row.intent_predicted) ==
             ConfidenceLevel::high;
}

}  // namespace

std::string_view to_string(ThresholdRule rule) {
  return rule == ThresholdRule::per_group_legacy ? "per_group_legacy" : "hierarchical";
}

PolicyFigures evaluate_policy(const Thresholds& thresholds,
                              const std::vector<LabelledPrediction>& rows,
                              std::optional<double> oos_share, const IntentPrior& intent_prior) {
  // In-scope rows weigh 1, or their intent's prior share over its row count; sums below are of
  // those weights (out-of-scope rows always weigh 1).
  std::vector<LabelledPrediction> weighted(rows);
  for (auto& row : weighted) row.weight = 1;
  if (!intent_prior.empty() && !reweight_to_intent_prior(weighted, intent_prior)) {
    for (auto& row : weighted) row.weight = 1;  // no in-scope row the prior covers: the rows' mix
  }
  double in_scope = 0, in_scope_answered = 0, in_scope_passes = 0, in_scope_answered_squares = 0;
  std::size_t out_of_scope = 0, out_of_scope_answered = 0, all_rows = 0;
  PolicyFigures figures;
  for (const LabelledPrediction& row : weighted) {
    const bool answered = policy_answers(thresholds, row);
    figures.answered += answered ? 1 : 0;
    ++all_rows;
    if (row.intent_true == kOutOfScopeIntent) {
      ++out_of_scope;
      out_of_scope_answered += answered ? 1 : 0;
    } else {
      in_scope += row.weight;
      if (answered) {
        in_scope_answered += row.weight;
        in_scope_answered_squares += row.weight * row.weight;
        in_scope_passes += is_edge_pass(row) ? row.weight : 0;
      }
    }
  }
  const auto ratio = [](double part, double whole) { return whole == 0 ? 0.0 : part / whole; };
  const double share = oos_share.value_or(ratio(static_cast<double>(out_of_scope), static_cast<double>(all_rows)));
  figures.oos_share = share;
  figures.in_scope_coverage = ratio(in_scope_answered, in_scope);
  figures.oos_leak = ratio(static_cast<double>(out_of_scope_answered), static_cast<double>(out_of_scope));
  figures.coverage = (1 - share) * figures.in_scope_coverage + share * figures.oos_leak;
  const double passes = (1 - share) * ratio(in_scope_passes, in_scope);
  figures.precision = figures.coverage > 0 ? passes / figures.coverage : 0;
  figures.out_of_scope_rows = out_of_scope;
  // Each answered row weighs its population's share over its weight: Kish's n of those weights.
  const double w_in = in_scope > 0 ? (1 - share) / in_scope : 0;
  const double w_out = out_of_scope ? share / static_cast<double>(out_of_scope) : 0;
  const double sum = w_in * in_scope_answered + w_out * static_cast<double>(out_of_scope_answered);
  const double squares = w_in * w_in * in_scope_answered_squares +
                         w_out * w_out * static_cast<double>(out_of_scope_answered);
  figures.precision_effective_n = squares > 0 ? sum * sum / squares : 0;
  return figures;
}

namespace {

// The options both entry points fit with; checked before any row is predicted.
Status check_fit_options(const CalibrateOptions& options) {
  if (!(options.target_precision > 0 && options.target_precision <= 1)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", options.target_precision);
    return Error{"invalid_argument",
                 std::string("target precision must be in (0, 1] (got ") + got + ")"};
  }
  if (options.min_support == 0) {
    return Error{"invalid_argument", "min support must be at least 1"};
  }
  if (!(options.confidence >= 0 && options.confidence < 1)) {
    return Error{"invalid_argument", "confidence must be in [0, 1) (0 = point estimates)"};
  }
  if (options.max_oos_leak && !(*options.max_oos_leak >= 0 && *options.max_oos_leak <= 1)) {
    return Error{"invalid_argument", "max out-of-scope leak must be in [0, 1]"};
  }
  return Ok{};
}

// A precision target bounds the leak only through the share of out-of-scope traffic; an operator
// who promises "at most L of out-of-scope questions get an FAQ answer" needs the bound itself.
// The answered out-of-scope rows are those with confidence >= their band's high, so one floor
// under every band's high just above the (m+1)-th most confident of them, m = floor(L · rows),
// leaves at most m: the least strict floor that keeps the promise. Floors report.file in place.
Status cap_oos_leak(const std::vector<LabelledPrediction>& rows, double max_leak, double confidence,
                    CalibrateReport& report) {
  ThresholdsFile fitted = report.file;
  fitted.version = "fitted";  // the real version is made from the final bands, after this
  auto thresholds = Thresholds::create(fitted, "calibrate");
  if (!thresholds) return thresholds.error();
  std::size_t out_of_scope = 0;
  std::vector<double> answered;  // confidences of the out-of-scope rows the bands answer
  for (const LabelledPrediction& row : rows) {
    if (row.intent_true != kOutOfScopeIntent) continue;
    ++out_of_scope;
    if (policy_answers(*thresholds, row)) answered.push_back(row.confidence);
  }
  if (out_of_scope == 0) {
    return Error{"invalid_argument",
                 "a maximum out-of-scope leak needs out-of-scope rows to measure it on: add rows "
                 "with intent \"" + std::string(kOutOfScopeIntent) +
                     "\", or give --oos-share so the model's stand-ins are used"};
  }
  auto allowed = static_cast<std::size_t>(std::floor(max_leak * static_cast<double>(out_of_scope) + 1e-9));
  if (confidence > 0) {
    // On new traffic: the most answered out-of-scope rows whose leak's UPPER bound stays under
    // the cap (fewer than the point estimate allows; none when the rows are too few to show it).
    const auto n = static_cast<double>(out_of_scope);
    while (allowed > 0 && wilson_upper_bound(static_cast<double>(allowed) / n, n, confidence) > max_leak) --allowed;
  }
  report.leak_before_cap = static_cast<double>(answered.size()) / static_cast<double>(out_of_scope);
  if (answered.size() <= allowed) return Ok{};
  std::sort(answered.begin(), answered.end(), std::greater<>());
  const double floor = std::nextafter(answered[allowed], 2.0);
  report.leak_floor = floor;
  const auto raise = [&](Band& band) { band.high = std::max(band.high, floor); };
  raise(report.file.default_band);
  for (auto* bands : {&report.file.task_types, &report.file.intents, &report.file.task_intents}) {
    for (auto& [key, band] : *bands) raise(band);
  }
  for (GroupFit& group : report.groups) raise(group.band);
  char note[160];
  std::snprintf(note, sizeof note,
                "every band's high raised to at least %.4f: out-of-scope leak %.3f -> at most "
                "%.3f",
                floor, report.leak_before_cap, max_leak);
  report.file.notes["max_oos_leak"] = note;
  return Ok{};
}

}  // namespace

Result<CalibrateReport> calibrate_predictions(std::vector<LabelledPrediction> rows,
                                              const CalibrateOptions& options) {
  if (Status valid = check_fit_options(options); !valid) return valid.error();
  if (rows.empty()) return Error{"data_invalid", "no usable rows to calibrate on"};

  CalibrateReport report;
  report.rows = rows.size();
  report.min_support = options.min_support;
  report.rule = options.rule;
  report.confidence = options.confidence;
  for (auto& row : rows) row.weight = 1;
  report.synthetic_oos_rows = static_cast<std::size_t>(
      std::count_if(rows.begin(), rows.end(), [](const LabelledPrediction& row) { return row.synthetic; }));
  report.data_oos_share = own_oos_share(rows);  // every weight is 1 here
  report.oos_share = options.oos_share.value_or(report.data_oos_share);
  if (options.oos_share) {
    if (Status status = reweight_to_oos_share(rows, *options.oos_share); !status) {
      return status.error();
    }
  }
  // The traffic's intent mix weighs the evidence of the predicted-intent groups: who is mistaken
  // for an intent, and how often those people ask. The default and task-type bands stay on the
  // rows' own mix (the typical intent's band): weighted, a few popular intents would decide them
  // for every intent, and close the edge for all when one of them is hard.
  std::vector<LabelledPrediction> intent_rows;
  if (!options.intent_prior.empty()) {
    intent_rows = rows;
    if (Status status = reweight_to_intent_prior(intent_rows, options.intent_prior); !status) {
      return status.error();
    }
    report.intent_prior_intents = options.intent_prior.size();
  }
  const std::vector<LabelledPrediction>& intent_evidence = intent_rows.empty() ? rows : intent_rows;

  // Groups of row copies: calibration sets are thousands of rows, and copies keep each group a
  // plain vector for fit_band.
  std::map<std::string, std::vector<LabelledPrediction>> by_task_type;
  std::map<std::string, std::vector<LabelledPrediction>> by_intent;
  std::map<std::string, std::map<std::string, std::vector<LabelledPrediction>>> by_task_intent;
  for (const LabelledPrediction& row : rows) by_task_type[row.task_type].push_back(row);
  for (const LabelledPrediction& row : intent_evidence) {
    // The edge never answers an out-of-scope prediction, so __oos__ gets no band of its own.
    if (is_answered(row)) {
      by_intent[row.intent_predicted].push_back(row);
      by_task_intent[row.intent_predicted][row.task_type].push_back(row);
    }
  }

  ThresholdsFile& file = report.file;
  file.target_precision = options.target_precision;
  if (options.rule == ThresholdRule::per_group_legacy) {
    if (auto band = fit_group_legacy("default", "", rows, options, report)) {
      file.default_band = *band;
    }
    for (const auto& [task_type, group_rows] : by_task_type) {
      if (auto band = fit_group_legacy("task_type", task_type, group_rows, options, report,
                                       &file.default_band)) {
        file.task_types.emplace(task_type, *band);
      }
    }
    for (const auto& [intent, group_rows] : by_intent) {
      if (auto band =
              fit_group_legacy("intent", intent, group_rows, options, report, &file.default_band)) {
        file.intents.emplace(intent, *band);
      }
    }
  } else {
    // The root is fitted as before: all rows are the most evidence there is.
    GroupFit root{"default", "", fit_band(rows, options.target_precision, options.min_support, options.confidence)};
    root.band = band_of(root.fit);
    root.reason = root.fit.note.empty() ? "fitted: the lowest threshold meeting the target"
                                        : "fitted: " + root.fit.note;
    root.precision_at_high = root.fit.precision_at_high;
    root.coverage_at_high = root.fit.coverage_at_high;
    if (!root.fit.note.empty()) file.notes["default"] = root.fit.note;
    file.default_band = root.band;
    report.groups.push_back(std::move(root));
    for (const auto& [task_type, group_rows] : by_task_type) {
      if (auto band = fit_group_shrunk("task_type", task_type, group_rows, "default",
                                       file.default_band, by_task_type.size(), options, report)) {
        file.task_types.emplace(task_type, *band);
      }
    }
    for (const auto& [intent, group_rows] : by_intent) {
      if (auto band = fit_group_shrunk("intent", intent, group_rows, "default", file.default_band,
                                       by_intent.size(), options, report)) {
        file.intents.emplace(intent, *band);
      }
    }
    std::size_t task_intent_groups = 0;
    for (const auto& [intent, tasks] : by_task_intent) task_intent_groups += tasks.size() < 2 ? 0 : tasks.size();
    for (const auto& [intent, tasks] : by_task_intent) {
      if (tasks.size() < 2) continue;  // one task type: the same rows as the intent group
      for (const auto& [task_type, group_rows] : tasks) {
        // "task/intent" is the file's key: a name holding '/' could not be read back.
        if (task_type.find('/') != std::string::npos || intent.find('/') != std::string::npos) {
          continue;
        }
        // The parent is what Thresholds::band falls back to without this entry.
        std::string parent_name = "default";
        Band parent = file.default_band;
        if (const auto it = file.intents.find(intent); it != file.intents.end()) {
          parent_name = group_name("intent", intent);
          parent = it->second;
        } else if (const auto task = file.task_types.find(task_type);
                   task != file.task_types.end()) {
          parent_name = group_name("task_type", task_type);
          parent = task->second;
        }
        const std::string key = task_type + "/" + intent;
        if (auto band = fit_group_shrunk("task_intent", key, group_rows, parent_name, parent,
                                         task_intent_groups, options, report)) {
          file.task_intents.emplace(key, *band);
        }
      }
    }
  }

  char shares[160];
  std::snprintf(shares, sizeof shares,
                "rule %s; out-of-scope share %.3f (calibration data %.3f); min support %zu",
                std::string(to_string(options.rule)).c_str(), report.oos_share,
                report.data_oos_share, options.min_support);
  file.notes["calibration"] = shares;
  if (report.synthetic_oos_rows > 0) {
    file.notes["synthetic_oos_rows"] = std::to_string(report.synthetic_oos_rows) +
                                       " stand-in out-of-scope rows (the model's held-out intents)";
  }
  char share[32];
  std::snprintf(share, sizeof share, "%.3f", report.oos_share);
  file.notes["oos_share"] = share;
  if (report.intent_prior_intents > 0) {
    file.notes["intent_prior"] = "in-scope rows weighted to the traffic's mix over " +
                                 std::to_string(report.intent_prior_intents) + " intents";
  }

  if (options.max_oos_leak) {
    if (Status capped = cap_oos_leak(rows, *options.max_oos_leak, options.confidence, report); !capped) {
      return capped.error();
    }
  }

  file.version =
      make_thresholds_version(file, options.now.value_or(std::chrono::system_clock::now()));
  auto thresholds = Thresholds::create(file, "calibrate");
  if (!thresholds) return thresholds.error();
  report.final_policy = evaluate_policy(*thresholds, rows, report.oos_share, options.intent_prior);
  if (report.data_oos_share > 0 || report.synthetic_oos_rows > 0) {
    for (double shifted : kShiftShares) {
      report.shift.push_back(evaluate_policy(*thresholds, rows, shifted, options.intent_prior));
    }
  }
  return report;
}

TrafficPrior traffic_intent_prior(const edge::IntentEngine& engine, const std::vector<std::string>& questions) {
  TrafficPrior result;
  std::map<std::string, std::size_t> predicted;
  for (const std::string& question : questions) {
    if (is_blank(question)) continue;
    ++result.questions;
    const edge::IntentPrediction prediction = engine.predict(question);
    if (prediction.intent == kOutOfScopeIntent || prediction.intent.empty()) continue;
    ++result.in_scope;
    ++predicted[prediction.intent];
  }
  if (result.questions == 0) return result;
  result.intents_seen = predicted.size();
  for (const std::string& label : engine.labels()) {
    if (label == kOutOfScopeIntent) continue;
    const auto it = predicted.find(label);
    result.prior[label] = 1.0 + static_cast<double>(it == predicted.end() ? 0 : it->second);
  }
  return result;
}

double own_oos_share(const std::vector<LabelledPrediction>& rows) {
  std::size_t data_rows = 0;
  std::size_t oos_rows = 0;
  for (const LabelledPrediction& row : rows) {
    if (row.synthetic) continue;
    ++data_rows;
    if (row.intent_true == kOutOfScopeIntent) ++oos_rows;
  }
  return data_rows == 0 ? 0 : static_cast<double>(oos_rows) / static_cast<double>(data_rows);
}

LabelledPrediction labelled_prediction(const edge::IntentPrediction& prediction, std::string task_type,
                                       std::string intent_true) {
  LabelledPrediction labelled;
  labelled.task_type = std::move(task_type);
  labelled.intent_true = std::move(intent_true);
  labelled.intent_predicted = prediction.intent;
  labelled.confidence = prediction.confidence;
  labelled.predicted_oos = prediction.is_oos;
  labelled.has_answer = !prediction.answer.empty();
  return labelled;
}

Result<CalibrateReport> calibrate_thresholds(const edge::IntentEngine& engine,
                                             const std::vector<CalibrationRow>& rows,
                                             const CalibrateOptions& options,
                                             std::vector<LabelledPrediction> out_of_fold, int folds) {
  if (Status valid = check_fit_options(options); !valid) return valid.error();
  if (is_blank(options.default_task_type)) {
    return Error{"invalid_argument", "default task type must not be empty"};
  }

  std::size_t skipped = 0;
  std::vector<LabelledPrediction> predictions;
  predictions.reserve(rows.size());
  Progress progress("calibrate: predicting", rows.size());
  for (const CalibrationRow& row : rows) {
    progress.advance();
    if (is_blank(row.text) || is_blank(row.intent)) {
      ++skipped;
      continue;
    }
    predictions.push_back(labelled_prediction(engine.predict(row.text),
                                              row.task_type.empty() ? options.default_task_type : row.task_type,
                                              row.intent));
  }
  const std::size_t cross_fit_rows = out_of_fold.size();
  CalibrateOptions fit_options = options;
  if (cross_fit_rows > 0 && !options.oos_share && !predictions.empty()) {
    // The training rows' mix is the FAQ's, not the traffic's: unless told, the share to fit for
    // stays the held-out rows' own (diluted by in-scope training rows it would admit more leak).
    fit_options.oos_share = own_oos_share(predictions);
  }
  std::move(out_of_fold.begin(), out_of_fold.end(), std::back_inserter(predictions));
  if (predictions.empty()) {
    return Error{"data_invalid",
                 "no usable rows to calibrate on (" + std::to_string(skipped) + " skipped)"};
  }
  // Traffic with S out of scope, calibration data with none: the model's stand-ins, if it has.
  const bool data_has_oos =
      std::any_of(predictions.begin(), predictions.end(), [](const LabelledPrediction& row) {
        return row.intent_true == kOutOfScopeIntent;
      });
  if (fit_options.synthetic_oos && fit_options.oos_share && *fit_options.oos_share > 0 && !data_has_oos &&
      engine.oos_scorer() != nullptr) {
    for (const edge::SyntheticOosRow& stand_in : engine.oos_scorer()->synthetic_out_of_scope()) {
      LabelledPrediction labelled;
      labelled.task_type = options.default_task_type;
      labelled.intent_true = std::string(kOutOfScopeIntent);
      labelled.intent_predicted = stand_in.intent;
      labelled.confidence = stand_in.confidence;
      labelled.synthetic = true;  // answered if it clears the band: the leak it stands for
      predictions.push_back(std::move(labelled));
    }
  }
  auto report = calibrate_predictions(std::move(predictions), fit_options);
  if (!report) return report.error();
  report->skipped = skipped;
  report->cross_fit_rows = cross_fit_rows;
  report->cross_fit_folds = folds;
  ThresholdsFile& file = report->file;
  if (cross_fit_rows > 0) {
    // Which evidence the bands rest on, for whoever reads the file later.
    file.notes["cross_fit"] = std::to_string(cross_fit_rows) + " training rows out of fold (" +
                              std::to_string(folds) + " fold models), with " +
                              std::to_string(report->rows - cross_fit_rows) + " held-out rows";
  }
  file.model_version = engine.model_version();
  file.version =
      make_thresholds_version(file, options.now.value_or(std::chrono::system_clock::now()));
  if (Status status = validate_thresholds(file, "calibrate"); !status) return status.error();
  return *std::move(report);
}

Result<std::vector<CalibrationRow>> read_calibration_rows(const std::string& path) {
  std::vector<CalibrationRow> rows;
  Status status = for_each_json_line(path, [&](const nlohmann::json& json, std::size_t) {
    CalibrationRow row;
    if (std::string why = required_string(json, "text", row.text); !why.empty()) return why;
    if (std::string why = required_string(json, "intent", row.intent); !why.empty()) return why;
    if (const auto it = json.find("task_type"); it != json.end() && !it->is_null()) {
      if (std::string why = required_string(json, "task_type", row.task_type); !why.empty())
        return why;
    }
    rows.push_back(std::move(row));
    return std::string();
  });
  if (!status) return status.error();
  return rows;
}

std::string format_calibrate_report(const CalibrateReport& report) {
  std::string out;
  const ThresholdsFile& file = report.file;
  const bool hierarchical = report.rule == ThresholdRule::hierarchical;
  append_format(out, "calibrated %zu rows (%zu skipped) with model %s\n", report.rows,
                report.skipped, file.model_version.c_str());
  if (report.cross_fit_rows > 0) {
    append_format(out, "  of them %zu out of fold: the model's training rows, each predicted by one of %d fold "
                  "models trained without it (--cross-fit)\n",
                  report.cross_fit_rows, report.cross_fit_folds);
  }
  append_format(out, "target precision %.3f, min support %zu, rule %s; thresholds %s\n",
                file.target_precision, report.min_support,
                std::string(to_string(report.rule)).c_str(), file.version.c_str());
  for (const GroupFit& group : report.groups) {
    // Hierarchical: inherited groups use their parent's band and may be many (one per intent);
    // the rule table lists them with why.
    if (hierarchical && group.kind != "default" && !group.written) continue;
    append_group(out, group, hierarchical);
  }
  if (hierarchical) {
    append_rule_table(out, report);
  } else if (!report.inherited.empty()) {
    append_format(out, "\ninherited (fewer than %zu rows, no band written):\n ",
                  report.min_support);
    std::size_t line_length = 1;
    for (const InheritedGroup& group : report.inherited) {
      std::string entry =
          " " + group_name(group.kind, group.key) + " (" + std::to_string(group.samples) + ")";
      if (line_length > 1 && line_length + entry.size() > kReportColumns) {
        out += "\n ";
        line_length = 1;
      }
      out += entry;
      line_length += entry.size();
    }
    out += "\n";
  }
  append_policy(out, report);
  return out;
}

}  // namespace hengshi::router
