#include "edge/serving_dir_watch.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "edge/model_manifest.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

std::string key_of(const std::string& task, const std::string& dir) { return task + '\x1f' + dir; }

}  // namespace

std::string directory_version(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kManifestFileName);
  if (!in) return {};
  const auto manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_object()) return {};
  const auto version = manifest.find("model_version");
  return version != manifest.end() && version->is_string() ? version->get<std::string>() : std::string();
}

FileStamp ServingDirWatch::stamp_directory(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error)) paths.push_back(it->path().string());
  }
  std::sort(paths.begin(), paths.end());
  return stamp_files(paths);
}

std::vector<DirChange> ServingDirWatch::poll(const ServingState& serving) {
  std::set<std::string> live;
  std::vector<DirChange> changes;
  for (const ServingDir& d : serving.directories()) {
    const std::string key = key_of(d.task, d.dir);
    live.insert(key);
    FileStamp now = stamp_directory(d.dir);
    auto [watch, first] = watches_.try_emplace(key, now);
    if (first || !watch->second.ready(now)) continue;
    DirChange change{d.task, d.dir, directory_version(d.dir), std::move(now)};
    if (!change.version.empty() && change.version == d.version) {
      tried(change);  // touched or rewritten with the same version: nothing new to serve
      continue;
    }
    changes.push_back(std::move(change));
  }
  std::erase_if(watches_, [&](const auto& entry) { return !live.contains(entry.first); });
  return changes;
}

void ServingDirWatch::tried(const DirChange& change) {
  if (auto watch = watches_.find(key_of(change.task, change.dir)); watch != watches_.end()) {
    watch->second.loaded(change.stamp);
  }
}

}  // namespace hengshi::edge
