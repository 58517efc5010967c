#include "obs/request_log.h"

#include <cerrno>
#include <chrono>
#include <cstring>

namespace hengshi::obs {

Result<std::unique_ptr<RequestLog>> RequestLog::open(const std::string& target) {
  if (target.empty()) return std::unique_ptr<RequestLog>(new RequestLog(nullptr, false));
  if (target == "-") return std::unique_ptr<RequestLog>(new RequestLog(stdout, false));
  std::FILE* file = std::fopen(target.c_str(), "a");
  if (!file) {
    return Error{"log_unwritable", target + ": cannot open request log: " + std::strerror(errno)};
  }
  return std::unique_ptr<RequestLog>(new RequestLog(file, true));
}

RequestLog::~RequestLog() {
  flush();
  if (owned_ && file_) std::fclose(file_);
}

void RequestLog::write(nlohmann::json record) {
  if (!file_) return;
  record["schema"] = kRequestLogSchemaVersion;
  record["ts"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::lock_guard lock(mutex_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);  // an operator tailing the log sees each request as it ends
}

void RequestLog::flush() {
  std::lock_guard lock(mutex_);
  if (file_) std::fflush(file_);
}

}  // namespace hengshi::obs
