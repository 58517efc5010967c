// `hengshi calibrate`: runs an intent model over labelled rows and fits the confidence bands of a
// thresholds file (thresholds.h) with fit_band (threshold_fit.h): the default band on all rows,
// then one band per task type and per predicted intent with enough rows. Groups with fewer rows
// inherit the next level's band and are not written.
//
// Pure functions over values; the engine is only read (IntentEngine::predict is thread-safe).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
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

struct CalibrateOptions {
  double target_precision = 0.97;  // edge precision each band's `high` must reach, in (0, 1]
  std::size_t min_support = 20;    // rows a group needs for a band of its own, and answers at high
  std::string default_task_type = "faq";  // task type of rows without one
  // Timestamp of the thresholds version; unset = the system clock (set in tests for stable output).
  std::optional<std::chrono::system_clock::time_point> now;
};

struct GroupFit {
  std::string kind;  // "default" | "task_type" | "intent"
  std::string key;   // task type or intent; empty for "default"
  FitResult fit;
  Band band;  // the band written: the fit's, kept at the default's high when the group's own
              // rows cannot show the target precision (95% Wilson lower bound)
};

// A group with fewer than min_support rows: no band written, it inherits.
struct InheritedGroup {
  std::string kind;  // "task_type" | "intent"
  std::string key;
  std::size_t samples = 0;
};

struct CalibrateReport {
  ThresholdsFile file;           // validated; ready for write_thresholds_file
  std::vector<GroupFit> groups;  // default first, then task types, then intents (sorted)
  std::vector<InheritedGroup> inherited;
  std::size_t rows = 0;         // rows predicted and fitted
  std::size_t skipped = 0;      // rows with an empty text or intent, left out
  std::size_t min_support = 0;  // the option the groups were cut with
};

// Predicts every row with `engine` and fits the bands. A per-intent group holds the rows whose
// PREDICTED intent (in scope) is that intent, since that is what its band gates at serve time.
// An unreachable fit gives high = kEdgeNever (1.01) for its group. file.notes holds each fit's
// note and each inherited group's reason, keyed "default", "task_type/<name>", "intent/<name>".
// file.model_version = engine.model_version(); file.version from make_thresholds_version.
// Errors: "invalid_argument" (target_precision not in (0, 1], min_support 0, empty
// default_task_type), "data_invalid" (no usable rows).
Result<CalibrateReport> calibrate_thresholds(const edge::IntentEngine& engine,
                                             const std::vector<CalibrationRow>& rows,
                                             const CalibrateOptions& options);

// Reads JSON Lines rows; other fields (e.g. "answer") are ignored and blank lines skipped. Errors
// (code "data_invalid") are "<path>:<line>: why" (or "<path>: why"): unreadable or empty file,
// invalid JSON, a row that is not an object, "text"/"intent" missing, not a string or empty,
// "task_type" present but not a non-empty string.
Result<std::vector<CalibrationRow>> read_calibration_rows(const std::string& path);

// The table `hengshi calibrate` prints: per group its buckets (confidence range, share of the
// group's samples, answered, edge pass rate; empty buckets left out), then the chosen high/low,
// precision and coverage at high, the monotonic flag and the fit's note; then inherited groups.
std::string format_calibrate_report(const CalibrateReport& report);

}  // namespace hengshi::router
