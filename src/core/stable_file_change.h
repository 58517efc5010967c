// The rule both file watchers (keys file, routing policy) follow: reload a file only once its
// size and modification time differ from what was loaded AND two polls in a row saw them the
// same, so a file still being written is never read half-way.
//
// Not thread-safe: the owner calls it under the lock that also guards its reloads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace hengshi {

// One file as a poll sees it; a missing (or unreadable) file is !exists.
struct FileState {
  bool exists = false;
  std::uintmax_t size = 0;  // 0 for a directory
  std::filesystem::file_time_type mtime{};
  bool operator==(const FileState&) const = default;
};
using FileStamp = std::vector<FileState>;

// Each path's state, in order; an empty path is a file that does not exist.
FileStamp stamp_files(const std::vector<std::string>& paths);

class StableFileChange {
 public:
  explicit StableFileChange(FileStamp loaded = {}) : loaded_(std::move(loaded)) {}

  // What a load (good or bad: a bad file is reported once per change) was read from.
  void loaded(FileStamp stamp) {
    loaded_ = std::move(stamp);
    pending_.reset();
  }
  // True when `now` should be loaded: it differs from the loaded stamp and the previous poll
  // saw it just so.
  bool ready(const FileStamp& now) {
    if (now == loaded_) {
      pending_.reset();
      return false;
    }
    if (pending_ != now) {
      pending_ = now;
      return false;
    }
    return true;
  }

 private:
  FileStamp loaded_;
  std::optional<FileStamp> pending_;  // a change the last poll saw, not loaded yet
};

}  // namespace hengshi
