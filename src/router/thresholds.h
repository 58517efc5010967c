// Thresholds: the calibrated confidence bands the router compares the intent model's confidence
// against, per task type and per intent, and the versioned JSON file `hengshi calibrate` writes
// and the server loads (hot-swappable: load + create off to the side, then swap the value).
//
// Band semantics: confidence >= high → edge answers; confidence < low → cloud-large; otherwise
// (the middle) → cloud-small. high = 1.01 (kEdgeNever) means the edge never answers that group,
// since calibrated confidences never exceed 1.
//
// Thresholds and ThresholdsFile are plain values; a const Thresholds is safe to share across
// threads.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/result.h"

namespace hengshi::router {

inline constexpr double kEdgeNever = 1.01;  // a `high` no confidence reaches
inline constexpr std::string_view kThresholdsFormat = "hengshi-thresholds";
inline constexpr int kThresholdsFormatVersion = 1;

struct Band {
  double high = 0.85;  // confidence >= high → edge
  double low = 0.5;    // confidence < low → cloud-large; in between → cloud-small
};

enum class ConfidenceLevel { high, middle, low };
std::string_view to_string(ConfidenceLevel level);  // "high" | "middle" | "low"

// The on-disk file, field for field (JSON keys are the member names; the default band is
// "default_band"). Unknown keys are refused so a typo never silently falls back to a default.
struct ThresholdsFile {
  std::string format = std::string(kThresholdsFormat);
  int format_version = kThresholdsFormatVersion;
  std::string version;        // e.g. "thr-20261129T190000Z-1a2b3c4d"; see make_thresholds_version
  std::string model_version;  // the intent model the thresholds were fitted for
  double target_precision = 0.97;
  Band default_band;
  std::map<std::string, Band> task_types;    // task_type → band
  std::map<std::string, Band> intents;       // intent → band
  std::map<std::string, Band> task_intents;  // "task/intent" → band
  std::map<std::string, std::string> notes;  // key → why a band is what it is (fit notes)
};

// Checks every band (0 <= low <= high <= kEdgeNever, finite), target_precision in (0, 1],
// format and format_version, a non-empty version and "task/intent" keys with both parts set.
// Error{"config_invalid", "<source>: intents.<name>.high: must be ..."}.
Status validate_thresholds(const ThresholdsFile& file, std::string_view source);

class Thresholds {
 public:
  Thresholds() = default;  // the default band only, for a server started without a file

  // `source` (a path, or "thresholds") prefixes error messages.
  static Result<Thresholds> create(ThresholdsFile file, std::string_view source = "thresholds");

  // Precedence: task/intent > intent > task_type > default; an empty task type or intent skips
  // the levels that need it. Does not allocate.
  Band band(std::string_view task_type, std::string_view intent) const;

  // NaN confidence is classified low (the safest route).
  ConfidenceLevel classify(double confidence, std::string_view task_type,
                           std::string_view intent) const;

  const ThresholdsFile& file() const { return file_; }

 private:
  using BandMap = std::map<std::string, Band, std::less<>>;

  ThresholdsFile file_;
  BandMap task_types_;
  BandMap intents_;
  std::map<std::string, BandMap, std::less<>> task_intents_;  // task → intent → band
};

// Parses and validates (validate_thresholds) a thresholds file. Errors are "config_invalid" and
// name source + field; an unknown format or format_version is refused.
Result<ThresholdsFile> parse_thresholds_json(std::string_view text, const std::string& source);
Result<ThresholdsFile> load_thresholds_file(const std::string& path);

// Pretty (2-space) JSON, keys in a fixed order (format first), map entries sorted: the same file
// gives the same bytes.
std::string thresholds_to_json(const ThresholdsFile& file);

// Validates, writes `path`.tmp-<pid> and renames it over `path`, so a reader never sees half a
// file. Error{"config_invalid" | "io_error", ...}.
Status write_thresholds_file(const ThresholdsFile& file, const std::string& path);

// "thr-<UTC yyyymmddThhmmssZ>-<8 hex>", the hex being a hash (FNV-1a, low 32 bits) of the file's
// JSON with the version field left empty: same content, same suffix.
std::string make_thresholds_version(const ThresholdsFile& file,
                                    std::chrono::system_clock::time_point now);

}  // namespace hengshi::router
