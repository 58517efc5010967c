// manifest.json of an intent model directory: what the directory is, which files belong to it
// (with sizes and xxh64 hashes), how it was trained and how it scored on its holdout. The engine
// refuses a directory whose manifest is not the format and version this build reads, or whose
// files are missing or differ from the manifest.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

inline constexpr std::string_view kIntentModelFormat = "hengshi-intent";
inline constexpr int kIntentModelFormatVersion = 1;
// A fine-tuned edge LLM directory (`hengshi finetune`): a full model or a LoRA adapter.
inline constexpr std::string_view kEdgeLlmFormat = "hengshi-edge-llm";
inline constexpr int kEdgeLlmFormatVersion = 1;

// Which kind of directory a reader expects.
struct ManifestFormat {
  std::string_view name = kIntentModelFormat;
  int version = kIntentModelFormatVersion;
};
inline constexpr ManifestFormat kIntentManifest{kIntentModelFormat, kIntentModelFormatVersion};
inline constexpr ManifestFormat kEdgeLlmManifest{kEdgeLlmFormat, kEdgeLlmFormatVersion};
inline constexpr std::string_view kManifestFileName = "manifest.json";

struct ManifestFile {
  std::string name;  // relative to the model directory, no folders
  std::uint64_t bytes = 0;
  std::string xxh64;  // 16 lowercase hex digits
};

struct ModelManifest {
  std::string format = std::string(kIntentModelFormat);
  int format_version = kIntentModelFormatVersion;
  std::string model_version;        // "<UTC yyyymmddThhmmssZ>-<8 hex of the model file hash>"
  std::string created_at;           // ISO-8601 UTC
  std::string model_file;           // "model.bin", or "model.ftz" when quantised
  std::vector<ManifestFile> files;  // every file the engine reads, manifest excluded
  // Informational blocks, written by the trainer and shown by tools; not interpreted on load.
  nlohmann::json training = nlohmann::json::object();
  nlohmann::json hyperparameters = nlohmann::json::object();
  nlohmann::json holdout_metrics = nlohmann::json::object();

  nlohmann::json to_json() const;
  // Checks format, format_version and the required fields; `source` names the file in errors.
  static Result<ModelManifest> from_json(const nlohmann::json& json, std::string_view source,
                                         ManifestFormat expected = kIntentManifest);
};

// xxh64 (seed 0) of a file's bytes as 16 lowercase hex digits, and its size.
Result<ManifestFile> describe_file(const std::filesystem::path& dir, std::string_view name);
// The same for a file given by its path (a data file, a base model), relative or absolute.
Result<ManifestFile> describe_path(const std::filesystem::path& file);
std::string xxh64_hex(std::string_view bytes);

// Writes dir/manifest.json (pretty-printed).
Status write_manifest(const std::filesystem::path& dir, const ModelManifest& manifest);

// Reads dir/manifest.json, checks its format and version, then checks that every listed file
// exists with the listed size and hash. Errors (code "model_invalid") name the file and field.
Result<ModelManifest> load_verified_manifest(const std::filesystem::path& dir,
                                             ManifestFormat expected = kIntentManifest);

// "20261202T031500Z" (compact) or "2026-12-02T03:15:00Z": model versions and created_at.
std::string utc_timestamp(bool compact);

// Writes `json` pretty-printed with a final newline. Errors: io_error naming the file.
Status write_json(const std::filesystem::path& path, const nlohmann::json& json);

// The trainers' staging folder: a hidden sibling of the target (the final rename stays on one
// file system), removed on every early return unless release()d after the rename.
class StagingDirectory {
 public:
  explicit StagingDirectory(const std::filesystem::path& target);
  ~StagingDirectory();
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;
  Status create();  // empties and creates it; io_error when it cannot
  const std::filesystem::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

// A LoRA adapter directory's manifest names the base model it was trained on by xxh64
// (training.base_xxh64): model_invalid unless `base`, described from `base_path`, is that file.
Status check_trained_base(const ModelManifest& adapter, const std::string& adapter_dir,
                          const ManifestFile& base, const std::string& base_path);

// Renames `staging` to `target` for the trainers' atomic writes. An existing `target` is removed
// first only when it is empty or a model directory (it has a manifest.json); anything else is
// refused ("invalid_argument"), so a mistyped --out never deletes someone's folder.
Status replace_model_directory(const std::filesystem::path& staging, const std::filesystem::path& target);

}  // namespace hengshi::edge
