#include "router/thresholds.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

namespace hengshi::router {
namespace {

Error invalid(std::string_view source, std::string_view field, std::string_view why) {
  return Error{"config_invalid",
               std::string(source) + ": " + std::string(field) + ": " + std::string(why)};
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

Status validate_band(const Band& band, std::string_view source, const std::string& field) {
  if (!std::isfinite(band.high) || band.high < 0 || band.high > kEdgeNever) {
    return invalid(source, field + ".high",
                   "must be in [0, " + number(kEdgeNever) + "] (got " + number(band.high) + ")");
  }
  if (!std::isfinite(band.low) || band.low < 0 || band.low > band.high) {
    return invalid(
        source, field + ".low",
        "must be in [0, high = " + number(band.high) + "] (got " + number(band.low) + ")");
  }
  return Ok{};
}

Status validate_bands(const std::map<std::string, Band>& bands, std::string_view source,
                      std::string_view map_name, bool task_intent_keys) {
  for (const auto& [name, band] : bands) {
    const std::string field = std::string(map_name) + "." + name;
    if (name.empty()) return invalid(source, map_name, "empty key");
    if (task_intent_keys) {
      const auto slash = name.find('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == name.size() ||
          name.find('/', slash + 1) != std::string::npos) {
        return invalid(source, field, "key must be \"<task_type>/<intent>\"");
      }
    }
    if (auto status = validate_band(band, source, field); !status) return status;
  }
  return Ok{};
}

// --- JSON reading: each helper names the field it failed on. ---

Status check_keys(const nlohmann::json& object, std::initializer_list<std::string_view> allowed,
                  std::string_view source, const std::string& path) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key == name;
    if (!known) {
      std::string list;
      for (std::string_view name : allowed) list += (list.empty() ? "" : ", ") + std::string(name);
      return invalid(source, path.empty() ? key : path + "." + key,
                     "unknown field (allowed: " + list + ")");
    }
  }
  return Ok{};
}

Result<double> read_number(const nlohmann::json& object, std::string_view key,
                           std::string_view source, const std::string& field) {
  const auto it = object.find(key);
  if (it == object.end()) return invalid(source, field, "is required");
  if (!it->is_number()) return invalid(source, field, "must be a number");
  return it->get<double>();
}

Result<std::string> read_string(const nlohmann::json& object, std::string_view key,
                                std::string_view source, const std::string& field) {
  const auto it = object.find(key);
  if (it == object.end()) return invalid(source, field, "is required");
  if (!it->is_string()) return invalid(source, field, "must be a string");
  return it->get<std::string>();
}

Result<Band> read_band(const nlohmann::json& json, std::string_view source,
                       const std::string& field) {
  if (!json.is_object()) return invalid(source, field, "must be an object {high, low}");
  if (auto status = check_keys(json, {"high", "low"}, source, field); !status) {
    return status.error();
  }
  auto high = read_number(json, "high", source, field + ".high");
  if (!high) return high.error();
  auto low = read_number(json, "low", source, field + ".low");
  if (!low) return low.error();
  return Band{*high, *low};
}

// An optional object of name → band.
Result<std::map<std::string, Band>> read_bands(const nlohmann::json& object, std::string_view key,
                                               std::string_view source) {
  std::map<std::string, Band> bands;
  const auto it = object.find(key);
  if (it == object.end()) return bands;
  const std::string field(key);
  if (!it->is_object()) return invalid(source, field, "must be an object (name → {high, low})");
  for (const auto& [name, value] : it->items()) {
    auto band = read_band(value, source, field + "." + name);
    if (!band) return band.error();
    bands.emplace(name, *band);
  }
  return bands;
}

nlohmann::ordered_json band_json(const Band& band) {
  return nlohmann::ordered_json{{"high", band.high}, {"low", band.low}};
}

nlohmann::ordered_json bands_json(const std::map<std::string, Band>& bands) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (const auto& [name, band] : bands) json[name] = band_json(band);
  return json;
}

std::uint32_t fnv1a_low32(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return static_cast<std::uint32_t>(hash);
}

}  // namespace

std::string_view to_string(ConfidenceLevel level) {
  switch (level) {
    case ConfidenceLevel::high:
      return "high";
    case ConfidenceLevel::middle:
      return "middle";
    case ConfidenceLevel::low:
      return "low";
  }
  return "low";
}

Status validate_thresholds(const ThresholdsFile& file, std::string_view source) {
  if (file.format != kThresholdsFormat) {
    return invalid(source, "format",
                   "unknown format \"" + file.format + "\" (expected \"" +
                       std::string(kThresholdsFormat) + "\")");
  }
  if (file.format_version != kThresholdsFormatVersion) {
    return invalid(source, "format_version",
                   "unsupported version " + std::to_string(file.format_version) +
                       " (this build reads " + std::to_string(kThresholdsFormatVersion) + ")");
  }
  if (file.version.empty()) return invalid(source, "version", "must not be empty");
  if (!std::isfinite(file.target_precision) || file.target_precision <= 0 ||
      file.target_precision > 1) {
    return invalid(source, "target_precision",
                   "must be in (0, 1] (got " + number(file.target_precision) + ")");
  }
  if (auto status = validate_band(file.default_band, source, "default_band"); !status) {
    return status;
  }
  if (auto status = validate_bands(file.task_types, source, "task_types", false); !status) {
    return status;
  }
  if (auto status = validate_bands(file.intents, source, "intents", false); !status) {
    return status;
  }
  return validate_bands(file.task_intents, source, "task_intents", true);
}

Result<Thresholds> Thresholds::create(ThresholdsFile file, std::string_view source) {
  if (auto status = validate_thresholds(file, source); !status) return status.error();
  Thresholds thresholds;
  thresholds.task_types_.insert(file.task_types.begin(), file.task_types.end());
  thresholds.intents_.insert(file.intents.begin(), file.intents.end());
  for (const auto& [key, band] : file.task_intents) {
    const auto slash = key.find('/');  // validated: exactly one, both sides non-empty
    thresholds.task_intents_[key.substr(0, slash)].emplace(key.substr(slash + 1), band);
  }
  thresholds.file_ = std::move(file);
  return thresholds;
}

Band Thresholds::band(std::string_view task_type, std::string_view intent) const {
  if (!task_type.empty() && !intent.empty()) {
    if (const auto task = task_intents_.find(task_type); task != task_intents_.end()) {
      if (const auto it = task->second.find(intent); it != task->second.end()) return it->second;
    }
  }
  if (!intent.empty()) {
    if (const auto it = intents_.find(intent); it != intents_.end()) return it->second;
  }
  if (!task_type.empty()) {
    if (const auto it = task_types_.find(task_type); it != task_types_.end()) return it->second;
  }
  return file_.default_band;
}

ConfidenceLevel Thresholds::classify(double confidence, std::string_view task_type,
                                     std::string_view intent) const {
  const Band selected = band(task_type, intent);
  if (std::isnan(confidence) || confidence < selected.low) return ConfidenceLevel::low;
  if (confidence >= selected.high) return ConfidenceLevel::high;
  return ConfidenceLevel::middle;
}

Result<ThresholdsFile> parse_thresholds_json(std::string_view text, const std::string& source) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Error{"config_invalid", source + ": invalid JSON"};
  if (!json.is_object()) return Error{"config_invalid", source + ": not a JSON object"};

  ThresholdsFile file;
  // The format is checked first: a file of another kind or version gets that error, not a list
  // of unknown fields.
  auto format = read_string(json, "format", source, "format");
  if (!format) return format.error();
  file.format = *format;
  const auto version_it = json.find("format_version");
  if (version_it == json.end()) return invalid(source, "format_version", "is required");
  if (!version_it->is_number_integer()) {
    return invalid(source, "format_version", "must be an integer");
  }
  file.format_version = version_it->get<int>();
  if (file.format != kThresholdsFormat || file.format_version != kThresholdsFormatVersion) {
    return validate_thresholds(file, source).error();
  }

  if (auto status =
          check_keys(json,
                     {"format", "format_version", "version", "model_version", "target_precision",
                      "default_band", "task_types", "intents", "task_intents", "notes"},
                     source, "");
      !status) {
    return status.error();
  }
  auto version = read_string(json, "version", source, "version");
  if (!version) return version.error();
  file.version = *version;
  auto model_version = read_string(json, "model_version", source, "model_version");
  if (!model_version) return model_version.error();
  file.model_version = *model_version;
  auto target = read_number(json, "target_precision", source, "target_precision");
  if (!target) return target.error();
  file.target_precision = *target;

  const auto default_it = json.find("default_band");
  if (default_it == json.end()) return invalid(source, "default_band", "is required");
  auto default_band = read_band(*default_it, source, "default_band");
  if (!default_band) return default_band.error();
  file.default_band = *default_band;

  auto task_types = read_bands(json, "task_types", source);
  if (!task_types) return task_types.error();
  file.task_types = std::move(*task_types);
  auto intents = read_bands(json, "intents", source);
  if (!intents) return intents.error();
  file.intents = std::move(*intents);
  auto task_intents = read_bands(json, "task_intents", source);
  if (!task_intents) return task_intents.error();
  file.task_intents = std::move(*task_intents);

  if (const auto notes = json.find("notes"); notes != json.end()) {
    if (!notes->is_object()) return invalid(source, "notes", "must be an object (key → text)");
    for (const auto& [key, value] : notes->items()) {
      if (!value.is_string()) return invalid(source, "notes." + key, "must be a string");
      file.notes.emplace(key, value.get<std::string>());
    }
  }

  if (auto status = validate_thresholds(file, source); !status) return status.error();
  return file;
}

Result<ThresholdsFile> load_thresholds_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"config_unreadable", path + ": cannot open thresholds file"};
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Error{"config_unreadable", path + ": cannot read thresholds file"};
  return parse_thresholds_json(text, path);
}

std::string thresholds_to_json(const ThresholdsFile& file) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  json["format"] = file.format;
  json["format_version"] = file.format_version;
  json["version"] = file.version;
  json["model_version"] = file.model_version;
  json["target_precision"] = file.target_precision;
  json["default_band"] = band_json(file.default_band);
  json["task_types"] = bands_json(file.task_types);
  json["intents"] = bands_json(file.intents);
  json["task_intents"] = bands_json(file.task_intents);
  nlohmann::ordered_json notes = nlohmann::ordered_json::object();
  for (const auto& [key, note] : file.notes) notes[key] = note;
  json["notes"] = std::move(notes);
  return json.dump(2) + "\n";
}

Status write_thresholds_file(const ThresholdsFile& file, const std::string& path) {
  if (auto status = validate_thresholds(file, path); !status) return status;
  const std::string staging = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(staging, std::ios::binary | std::ios::trunc);
    out << thresholds_to_json(file);
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(staging, ignored);
      return Error{"io_error", staging + ": cannot write"};
    }
  }
  std::error_code ec;
  std::filesystem::rename(staging, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(staging, ignored);
    return Error{"io_error", path + ": cannot move thresholds into place: " + ec.message()};
  }
  return Ok{};
}

std::string make_thresholds_version(const ThresholdsFile& file,
                                    std::chrono::system_clock::time_point now) {
  ThresholdsFile content = file;
  content.version.clear();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  char hash[16];
  std::snprintf(hash, sizeof hash, "%08x",
                static_cast<unsigned>(fnv1a_low32(thresholds_to_json(content))));
  return std::string("thr-") + stamp + "-" + hash;
}

}  // namespace hengshi::router
