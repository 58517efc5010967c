#include "edge/model_manifest.h"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>

#include "edge/model_field_error.h"

namespace hengshi::edge {
namespace {

std::string hex64(XXH64_hash_t hash) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(hash));
  return buffer;
}

bool is_plain_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of("/\\") == std::string_view::npos;
}

}  // namespace

std::string xxh64_hex(std::string_view bytes) {
  return hex64(XXH64(bytes.data(), bytes.size(), 0));
}

Result<ManifestFile> describe_file(const std::filesystem::path& dir, std::string_view name) {
  const std::filesystem::path path = dir / name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"model_invalid", path.string() + ": missing or unreadable"};
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::array<char, 1 << 16> buffer{};
  ManifestFile file{std::string(name), 0, {}};
  while (in) {
    in.read(buffer.data(), buffer.size());
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    XXH64_update(state, buffer.data(), static_cast<std::size_t>(got));
    file.bytes += static_cast<std::uint64_t>(got);
  }
  const bool read_error = in.bad();
  file.xxh64 = hex64(XXH64_digest(state));
  XXH64_freeState(state);
  if (read_error) return Error{"model_invalid", path.string() + ": read error"};
  return file;
}

Result<ManifestFile> describe_path(const std::filesystem::path& file) {
  return describe_file(file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path(),
                       file.filename().string());
}

Status check_trained_base(const ModelManifest& adapter, const std::string& adapter_dir,
                          const ManifestFile& base, const std::string& base_path) {
  const std::string trained_on = adapter.training.value("base_xxh64", "");
  if (trained_on == base.xxh64) return Ok{};
  return Error{"model_invalid", adapter_dir + " was trained on a base with xxh64 " + trained_on +
                                    ", not " + base_path + " (" + base.xxh64 + ")"};
}

nlohmann::json ModelManifest::to_json() const {
  nlohmann::json file_rows = nlohmann::json::array();
  for (const ManifestFile& file : files) {
    file_rows.push_back({{"name", file.name}, {"bytes", file.bytes}, {"xxh64", file.xxh64}});
  }
  return {{"format", format},
          {"format_version", format_version},
          {"model_version", model_version},
          {"created_at", created_at},
          {"model_file", model_file},
          {"files", file_rows},
          {"training", training},
          {"hyperparameters", hyperparameters},
          {"holdout_metrics", holdout_metrics}};
}

Result<ModelManifest> ModelManifest::from_json(const nlohmann::json& json,
                                               std::string_view source,
                                               ManifestFormat expected) {
  const std::filesystem::path file(source);
  if (!json.is_object()) return Error{"model_invalid", file.string() + ": not a JSON object"};
  ModelManifest manifest;

  const auto string_field = [&](std::string_view field, std::string& out) -> Status {
    const auto it = json.find(field);
    if (it == json.end() || !it->is_string() || it->get<std::string>().empty()) {
      return model_field_invalid(file, field, "missing or not a non-empty string");
    }
    out = it->get<std::string>();
    return Ok{};
  };

  if (Status s = string_field("format", manifest.format); !s) return s.error();
  if (manifest.format != expected.name) {
    return model_field_invalid(
        file, "format",
        "is \"" + manifest.format + "\", expected \"" + std::string(expected.name) + "\"");
  }
  const auto version = json.find("format_version");
  if (version == json.end() || !version->is_number_integer()) {
    return model_field_invalid(file, "format_version", "missing or not an integer");
  }
  manifest.format_version = version->get<int>();
  if (manifest.format_version != expected.version) {
    return model_field_invalid(file, "format_version",
                               "is " + std::to_string(manifest.format_version) +
                                   ", this build reads " + std::to_string(expected.version) +
                                   " (retrain the model)");
  }
  if (Status s = string_field("model_version", manifest.model_version); !s) return s.error();
  if (Status s = string_field("model_file", manifest.model_file); !s) return s.error();
  if (const auto it = json.find("created_at"); it != json.end() && it->is_string()) {
    manifest.created_at = it->get<std::string>();
  }

  const auto files = json.find("files");
  if (files == json.end() || !files->is_array()) {
    return model_field_invalid(file, "files", "missing or not an array");
  }
  for (std::size_t i = 0; i < files->size(); ++i) {
    const nlohmann::json& row = (*files)[i];
    const std::string where = "files[" + std::to_string(i) + "]";
    if (!row.is_object() || !row.contains("name") || !row["name"].is_string() ||
        !row.contains("bytes") || !row["bytes"].is_number_unsigned() || !row.contains("xxh64") ||
        !row["xxh64"].is_string()) {
      return model_field_invalid(file, where, "needs string name, unsigned bytes, string xxh64");
    }
    ManifestFile entry{row["name"].get<std::string>(), row["bytes"].get<std::uint64_t>(),
                       row["xxh64"].get<std::string>()};
    if (!is_plain_name(entry.name)) {
      return model_field_invalid(file, where + ".name",
                                 "\"" + entry.name + "\" is not a plain file name");
    }
    manifest.files.push_back(std::move(entry));
  }
  const bool lists_model =
      std::any_of(manifest.files.begin(), manifest.files.end(),
                  [&](const ManifestFile& f) { return f.name == manifest.model_file; });
  if (!lists_model) {
    return model_field_invalid(file, "model_file",
                               "\"" + manifest.model_file + "\" is not listed in files");
  }
  for (auto [field, target] : {std::pair{"training", &manifest.training},
                               std::pair{"hyperparameters", &manifest.hyperparameters},
                               std::pair{"holdout_metrics", &manifest.holdout_metrics}}) {
    if (const auto it = json.find(field); it != json.end()) *target = *it;
  }
  return manifest;
}

Status write_manifest(const std::filesystem::path& dir, const ModelManifest& manifest) {
  const std::filesystem::path path = dir / kManifestFileName;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << manifest.to_json().dump(2) << "\n";
  out.close();
  if (!out) return Error{"io_error", path.string() + ": cannot write"};
  return Ok{};
}

Result<ModelManifest> load_verified_manifest(const std::filesystem::path& dir,
                                             ManifestFormat expected) {
  const std::filesystem::path path = dir / kManifestFileName;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error{"model_invalid",
                 path.string() + ": missing (not a " + std::string(expected.name) +
                     " model directory?)"};
  }
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Error{"model_invalid", path.string() + ": invalid JSON"};
  auto manifest = ModelManifest::from_json(json, path.string(), expected);
  if (!manifest) return manifest.error();

  for (std::size_t i = 0; i < manifest->files.size(); ++i) {
    const ManifestFile& expected = manifest->files[i];
    auto actual = describe_file(dir, expected.name);
    if (!actual) return actual.error();
    const std::string where = "files[" + std::to_string(i) + "] (" + expected.name + ")";
    if (actual->bytes != expected.bytes) {
      return model_field_invalid(path, where + ".bytes",
                                 "manifest says " + std::to_string(expected.bytes) + ", file has " +
                                     std::to_string(actual->bytes));
    }
    if (actual->xxh64 != expected.xxh64) {
      return model_field_invalid(
          path, where + ".xxh64",
          "manifest says " + expected.xxh64 + ", file hashes to " + actual->xxh64);
    }
  }
  return manifest;
}

// Replaces `target` by `staging`: only an empty directory or a previous model directory
// (one with a manifest.json) is ever removed.
Status replace_model_directory(const std::filesystem::path& staging, const std::filesystem::path& target) {
  std::error_code ec;
  if (std::filesystem::exists(target, ec)) {
    const bool is_model_dir = std::filesystem::exists(target / kManifestFileName, ec);
    const bool is_empty_dir =
        std::filesystem::is_directory(target, ec) && std::filesystem::is_empty(target, ec);
    if (!is_model_dir && !is_empty_dir) {
      return Error{"invalid_argument",
                   target.string() + ": exists and is not a model directory; not overwriting it"};
    }
    std::filesystem::remove_all(target, ec);
    if (ec) return Error{"io_error", target.string() + ": cannot replace: " + ec.message()};
  }
  std::filesystem::rename(staging, target, ec);
  if (ec)
    return Error{"io_error", target.string() + ": cannot move model into place: " + ec.message()};
  return Ok{};
}

std::string utc_timestamp(bool compact) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, compact ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

Status write_json(const std::filesystem::path& path, const nlohmann::json& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return Error{"io_error", path.string() + ": cannot write"};
  return Ok{};
}

StagingDirectory::StagingDirectory(const std::filesystem::path& target)
    : path_(target.parent_path() / ("." + target.filename().string() + ".staging-" +
                                    std::to_string(static_cast<long>(::getpid())))) {}

StagingDirectory::~StagingDirectory() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

Status StagingDirectory::create() {
  std::error_code ec;
  std::filesystem::create_directories(path_.parent_path(), ec);
  std::filesystem::remove_all(path_, ec);
  if (!std::filesystem::create_directories(path_, ec)) {
    return Error{"io_error", path_.string() + ": cannot create: " + ec.message()};
  }
  return Ok{};
}

}  // namespace hengshi::edge
