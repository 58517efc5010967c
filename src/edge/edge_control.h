// EdgeControl: what the admin listener asks of the edge LLM's lifecycle — promote a fine-tuned
// directory after the regression gate, roll back, and show what serves. The implementation
// (LlmLifecycle) needs llama.cpp; the server sees only this interface, so builds without it
// link and answer the admin routes with "no edge LLM".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/asio.h"

namespace hengshi::edge {

struct PromoteRequest {
  std::string dir;   // a `hengshi finetune` output directory
  std::string task;  // a LoRA adapter's task type; "" for a full model
  std::string data;  // the regression set; "" = edge.llm.gate.data
  std::string by;    // who asks, for the history
};

// The answer to a promotion or rollback. `code` is "" when it took; else why not:
//   gate_failed (422), model_invalid / model_load_failed / adapter_load_failed / data_invalid
//   (422), request_invalid (400), change_in_progress / no_previous_version /
//   history_not_configured (409), io_error (500).
// `report` holds the history entry written (with the gate's figures when it ran).
struct EdgeOutcome {
  std::string code;
  std::string message;
  nlohmann::json report;
  bool took() const { return code.empty(); }
};

class EdgeControl {
 public:
  virtual ~EdgeControl() = default;
  // Both run on the lifecycle's own thread and resume on the caller's executor; one change at a
  // time (a second one gets change_in_progress).
  virtual awaitable<EdgeOutcome> promote(PromoteRequest request) = 0;
  virtual awaitable<EdgeOutcome> rollback(std::string by) = 0;
  // What serves per task type, the previous version, the last promotion and rollback (with the
  // gate's figures), and the last refused attempt. `brief`: the part /readyz shows.
  virtual nlohmann::json status(bool brief) const = 0;
};

}  // namespace hengshi::edge
