#include "core/stable_file_change.h"

#include <system_error>

namespace hengshi {

FileStamp stamp_files(const std::vector<std::string>& paths) {
  FileStamp stamp(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].empty()) continue;
    std::error_code error;
    const auto status = std::filesystem::status(paths[i], error);
    if (error || !std::filesystem::exists(status)) continue;
    FileState& state = stamp[i];
    state.mtime = std::filesystem::last_write_time(paths[i], error);
    if (error) continue;
    if (std::filesystem::is_regular_file(status)) {
      state.size = std::filesystem::file_size(paths[i], error);
      if (error) continue;
    }
    state.exists = true;
  }
  return stamp;
}

}  // namespace hengshi
