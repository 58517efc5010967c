#include "edge/edge_history.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <spdlog/spdlog.h>

#include "core/json_text.h"

namespace hengshi::edge {

nlohmann::json HistoryEntry::to_json() const {
  nlohmann::json json = {{"schema", kEdgeHistorySchema}, {"at", at},         {"by", by},
                         {"action", action},             {"result", result}, {"from", from.to_json()},
                         {"to", to.to_json()},           {"load_ms", load_ms}, {"swap_ms", swap_ms}};
  if (!task.empty()) json["task"] = task;
  if (!candidate.empty()) json["candidate"] = candidate;
  if (!gate.is_null()) json["gate"] = gate;
  if (!error.empty()) json["error"] = error;
  return json;
}

Result<HistoryEntry> HistoryEntry::from_json(const nlohmann::json& json) {
  if (!json.is_object()) return Error{"history_invalid", "not a JSON object"};
  if (json.value("schema", 0) != kEdgeHistorySchema) {
    return Error{"history_invalid", "schema is not " + std::to_string(kEdgeHistorySchema)};
  }
  HistoryEntry entry;
  auto text = [&json](const char* field) {
    return json.contains(field) && json[field].is_string() ? json[field].get<std::string>() : std::string();
  };
  entry.at = text("at");
  entry.by = text("by");
  entry.action = text("action");
  entry.result = text("result");
  entry.task = text("task");
  entry.candidate = text("candidate");
  entry.error = text("error");
  if (entry.action != "promote" && entry.action != "rollback") return Error{"history_invalid", "action is not promote or rollback"};
  if (entry.result.empty()) return Error{"history_invalid", "result is missing"};
  for (auto [field, state] : {std::pair{"from", &entry.from}, std::pair{"to", &entry.to}}) {
    if (!json.contains(field)) return Error{"history_invalid", std::string(field) + " is missing"};
    auto parsed = ServingState::from_json(json[field]);
    if (!parsed) return Error{"history_invalid", std::string(field) + ": " + parsed.error().message};
    *state = std::move(*parsed);
  }
  if (json.contains("gate")) entry.gate = json["gate"];
  if (json.contains("load_ms") && json["load_ms"].is_number()) entry.load_ms = json["load_ms"].get<double>();
  if (json.contains("swap_ms") && json["swap_ms"].is_number()) entry.swap_ms = json["swap_ms"].get<double>();
  return entry;
}

Result<EdgeHistory> EdgeHistory::open(std::string path) {
  EdgeHistory history;
  history.path_ = std::move(path);
  std::ifstream in(history.path_, std::ios::binary);
  if (!in) return history;  // not written yet
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < content.size();) {
    const std::size_t end = content.find('\n', start);
    const bool complete = end != std::string::npos;
    const std::string line = content.substr(start, complete ? end - start : std::string::npos);
    start = complete ? end + 1 : content.size();
    ++line_number;
    if (line.empty()) continue;
    const std::string where = history.path_ + ":" + std::to_string(line_number);
    const auto json = nlohmann::json::parse(line, nullptr, false);
    auto entry = json.is_discarded() ? Result<HistoryEntry>(Error{"history_invalid", "not JSON"})
                                     : HistoryEntry::from_json(json);
    if (!entry) {
      if (!complete) {
        spdlog::warn("{}: the last line was cut short (a crash while writing?); skipped", where);
        break;
      }
      return Error{"history_invalid", where + ": " + entry.error().message};
    }
    history.entries_.push_back(std::move(*entry));
  }
  return history;
}

Status EdgeHistory::append(const HistoryEntry& entry) {
  const std::string line = dump_text(entry.to_json()) + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Error{"io_error", "cannot open " + path_ + ": " + std::strerror(errno)};
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = std::strerror(errno);
      ::close(fd);
      return Error{"io_error", "cannot write " + path_ + ": " + reason};
    }
    written += static_cast<std::size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced) return Error{"io_error", "cannot sync " + path_};
  entries_.push_back(entry);
  return Ok{};
}

std::vector<ServingState> EdgeHistory::stack() const {
  std::vector<ServingState> states;
  for (const auto& entry : entries_) {
    if (!entry.took()) continue;
    if (entry.action == "promote") {
      if (states.empty()) states.push_back(entry.from);
      states.push_back(entry.to);
    } else if (states.size() > 1) {
      states.pop_back();
    }
  }
  return states;
}

std::optional<ServingState> EdgeHistory::serving() const {
  auto states = stack();
  if (states.empty()) return std::nullopt;
  return states.back();
}

std::optional<ServingState> EdgeHistory::rollback_target() const {
  auto states = stack();
  if (states.size() < 2) return std::nullopt;
  return states[states.size() - 2];
}

const HistoryEntry* EdgeHistory::last(const std::string& action) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->action == action && it->took()) return &*it;
  }
  return nullptr;
}

}  // namespace hengshi::edge
