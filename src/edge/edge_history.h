// EdgeHistory: the edge LLM's promotion history, one JSON line per promotion or rollback
// (schema 1): who, when, what was asked, the serving state before and after, and the gate's
// figures. Every attempt is recorded, refused ones too. It is also the live slot's memory: the
// serving state after the last change that took is what a restarted gateway serves, and the
// changes that took form a stack that rollback walks back down.
//
// Thread-safety: none; the lifecycle calls it under its own lock.
#pragma once

#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "edge/serving_state.h"

namespace hengshi::edge {

inline constexpr int kEdgeHistorySchema = 1;

struct HistoryEntry {
  std::string at;         // ISO-8601 UTC
  std::string by;         // who asked: the request's "by", else "admin@<peer>"
  std::string action;     // promote | rollback
  std::string result;     // promoted | refused | failed | rolled_back
  std::string task;       // a LoRA promotion's task type; "" for a base model or a rollback
  std::string candidate;  // the directory a promotion asked for
  ServingState from, to;  // serving before and after (equal unless it took)
  nlohmann::json gate;    // the gate's figures (a promotion that reached the gate), else null
  double load_ms = 0;     // loading the new version on the side (0 for an instant rollback)
  double swap_ms = 0;     // the atomic swap itself
  std::string error;      // why it was refused or failed

  bool took() const { return result == "promoted" || result == "rolled_back"; }
  nlohmann::json to_json() const;
  static Result<HistoryEntry> from_json(const nlohmann::json& json);
};

class EdgeHistory {
 public:
  // Reads the file when it exists (it is created on the first append). A last line cut short
  // (a crash mid-write) is skipped with a warning; any other bad line is an error naming the
  // file and line (history_invalid).
  static Result<EdgeHistory> open(std::string path);

  // Appends one line and syncs it to disk. Errors: io_error naming the file.
  Status append(const HistoryEntry& entry);

  const std::string& path() const { return path_; }
  const std::vector<HistoryEntry>& entries() const { return entries_; }
  // Serving after the last change that took; nullopt when nothing was ever promoted.
  std::optional<ServingState> serving() const;
  // Where a rollback goes: the state under the current one on the stack of changes that took
  // (a promotion pushes, a rollback pops); nullopt when there is nothing to go back to.
  std::optional<ServingState> rollback_target() const;
  // The last entry of `action` that took, if any.
  const HistoryEntry* last(const std::string& action) const;

 private:
  std::vector<ServingState> stack() const;
  std::string path_;
  std::vector<HistoryEntry> entries_;
};

}  // namespace hengshi::edge
