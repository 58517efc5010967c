// RequestLog: one JSON object per line per request (DESIGN.md §4), enough to replay a request's
// routing and recalibrate: id, ts, session, task_type, route, reason, level, fallback_type,
// cache, latency, tokens, cost, models. Never the message text (PII stays out of logs).
//
// Thread-safety: write() may be called from any thread; lines are never interleaved.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace hengshi::obs {

inline constexpr int kRequestLogSchemaVersion = 1;

class RequestLog {
 public:
  // target: "-" = stdout, "" = disabled, else a file opened for append.
  static Result<std::unique_ptr<RequestLog>> open(const std::string& target);
  ~RequestLog();

  bool enabled() const { return file_ != nullptr; }
  void write(nlohmann::json record);
  void flush();

 private:
  RequestLog(std::FILE* file, bool owned) : file_(file), owned_(owned) {}
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;
};

}  // namespace hengshi::obs
