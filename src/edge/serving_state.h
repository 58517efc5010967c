// ServingState: what the edge LLM's live slot serves — the base model and the adapter per task
// type — as plain data. The gateway loads it at start (from the config, or from the promotion
// history when there is one), a promotion or a rollback replaces it, and the history file
// records it after every change so a restart serves what was last promoted.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/result.h"

namespace hengshi::edge {

struct ServingAdapter {
  std::string dir;      // a `hengshi finetune --output lora` directory
  double scale = 1.0;
  std::string version;  // its manifest's model_version (filled when loaded)
  bool operator==(const ServingAdapter&) const = default;
};

// One directory a state serves from, with the version it names.
struct ServingDir {
  std::string task;  // the adapter's task type; "" = a promoted full model
  std::string dir;
  std::string version;
};

struct ServingState {
  std::string model_path;     // the base GGUF file
  std::string model_dir;      // a promoted full model's finetune directory; "" = a plain file
  std::string model_version;  // that directory's model_version; "" for a plain file
  std::map<std::string, ServingAdapter> adapters;  // task type → adapter

  bool operator==(const ServingState&) const = default;
  // "base.gguf" / "model.gguf@<version>", then " + faq@<version>" per adapter.
  std::string describe() const;
  // The promoted full model's directory (if any), then each adapter's.
  std::vector<ServingDir> directories() const;
  nlohmann::json to_json() const;
  // Errors (history_invalid) name the field.
  static Result<ServingState> from_json(const nlohmann::json& json);
  // The state the config asks for (edge.llm.model_path and edge.llm.adapters).
  static ServingState from_config(const EdgeLlmConfig& config);
};

}  // namespace hengshi::edge
