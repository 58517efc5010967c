#include "router/calibrate.h"

#include "core/json_lines.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

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

// One-sided 95% Wilson lower bound of a pass rate: what `passes` of `answered` can *show*.
double wilson_lower_bound(std::size_t passes, std::size_t answered) {
  if (answered == 0) return 0.0;
  constexpr double z = 1.6448536;  // one-sided 95%
  const double n = static_cast<double>(answered);
  const double p = static_cast<double>(passes) / n;
  const double centre = p + z * z / (2 * n);
  const double spread = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n));
  return (centre - spread) / (1 + z * z / n);
}

// Fits a group's rows, or records it as inherited when it has too few. Returns the band to write.
// A group may be stricter than `floor` freely, but looser only when its own rows show the target
// with 95% confidence (Wilson): 20 of 20 right is consistent with a true precision near 0.86, and
// bench/router measured small intent groups with loose bands missing the target on unseen data.
std::optional<Band> fit_group(std::string_view kind, const std::string& key,
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
                 fit_band(rows, options.target_precision, options.min_support)};
  if (!group.fit.note.empty()) report.file.notes[name] = group.fit.note;
  Band band = band_of(group.fit);
  if (floor != nullptr && band.high < floor->high) {
    std::size_t answered = 0, passes = 0;
    for (const auto& row : rows) {
      if (!is_answered(row) || row.confidence < band.high) continue;
      ++answered;
      if (is_edge_pass(row)) ++passes;
    }
    const double bound = wilson_lower_bound(passes, answered);
    if (bound < options.target_precision) {
      char note[200];
      std::snprintf(note, sizeof note,
                    "high %.3f kept at the default %.3f: %zu/%zu right above it shows only %.3f "
                    "(95%% Wilson lower bound) < target %.2f",
                    band.high, floor->high, passes, answered, bound, options.target_precision);
      report.file.notes[name] = note;
      group.fit.note = note;
      band.high = floor->high;
      band.low = std::min(band.low, band.high);
    }
  }
  group.band = band;
  report.groups.push_back(std::move(group));
  return band;
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

void append_group(std::string& out, const GroupFit& group) {
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
                fit.precision_at_high, fit.coverage_at_high, fit.monotonic ? "yes" : "no");
  if (!fit.note.empty()) append_format(out, "  note: %s\n", fit.note.c_str());
}

}  // namespace

Result<CalibrateReport> calibrate_thresholds(const edge::IntentEngine& engine,
                                             const std::vector<CalibrationRow>& rows,
                                             const CalibrateOptions& options) {
  if (!(options.target_precision > 0 && options.target_precision <= 1)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", options.target_precision);
    return Error{"invalid_argument",
                 std::string("target precision must be in (0, 1] (got ") + got + ")"};
  }
  if (options.min_support == 0) {
    return Error{"invalid_argument", "min support must be at least 1"};
  }
  if (is_blank(options.default_task_type)) {
    return Error{"invalid_argument", "default task type must not be empty"};
  }

  CalibrateReport report;
  report.min_support = options.min_support;
  std::vector<LabelledPrediction> all;
  all.reserve(rows.size());
  std::map<std::string, std::vector<LabelledPrediction>> by_task_type;
  std::map<std::string, std::vector<LabelledPrediction>> by_intent;
  for (const CalibrationRow& row : rows) {
    if (is_blank(row.text) || is_blank(row.intent)) {
      ++report.skipped;
      continue;
    }
    const edge::IntentPrediction prediction = engine.predict(row.text);
    LabelledPrediction labelled;
    labelled.task_type = row.task_type.empty() ? options.default_task_type : row.task_type;
    labelled.intent_true = row.intent;
    labelled.intent_predicted = prediction.intent;
    labelled.confidence = prediction.confidence;
    labelled.predicted_oos = prediction.is_oos;
    by_task_type[labelled.task_type].push_back(labelled);
    // The edge never answers an out-of-scope prediction, so __oos__ gets no band of its own.
    if (is_answered(labelled)) by_intent[labelled.intent_predicted].push_back(labelled);
    all.push_back(std::move(labelled));
  }
  report.rows = all.size();
  if (all.empty()) {
    return Error{"data_invalid",
                 "no usable rows to calibrate on (" + std::to_string(report.skipped) + " skipped)"};
  }

  ThresholdsFile& file = report.file;
  file.model_version = engine.model_version();
  file.target_precision = options.target_precision;
  if (auto band = fit_group("default", "", all, options, report)) file.default_band = *band;
  for (const auto& [task_type, group_rows] : by_task_type) {
    if (auto band = fit_group("task_type", task_type, group_rows, options, report, &file.default_band)) {
      file.task_types.emplace(task_type, *band);
    }
  }
  for (const auto& [intent, group_rows] : by_intent) {
    if (auto band = fit_group("intent", intent, group_rows, options, report, &file.default_band)) {
      file.intents.emplace(intent, *band);
    }
  }
  file.version =
      make_thresholds_version(file, options.now.value_or(std::chrono::system_clock::now()));
  if (Status status = validate_thresholds(file, "calibrate"); !status) return status.error();
  return report;
}

Result<std::vector<CalibrationRow>> read_calibration_rows(const std::string& path) {
  std::vector<CalibrationRow> rows;
  Status status = for_each_json_line(path, [&](const nlohmann::json& json, std::size_t) {
    CalibrationRow row;
    if (std::string why = required_string(json, "text", row.text); !why.empty()) return why;
    if (std::string why = required_string(json, "intent", row.intent); !why.empty()) return why;
    if (const auto it = json.find("task_type"); it != json.end() && !it->is_null()) {
      if (std::string why = required_string(json, "task_type", row.task_type); !why.empty()) return why;
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
  append_format(out, "calibrated %zu rows (%zu skipped) with model %s\n", report.rows,
                report.skipped, file.model_version.c_str());
  append_format(out, "target precision %.3f, min support %zu; thresholds %s\n",
                file.target_precision, report.min_support, file.version.c_str());
  for (const GroupFit& group : report.groups) append_group(out, group);
  if (!report.inherited.empty()) {
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
  return out;
}

}  // namespace hengshi::router
