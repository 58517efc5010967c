#include "edge/serving_state.h"

#include <filesystem>

namespace hengshi::edge {

std::vector<ServingDir> ServingState::directories() const {
  std::vector<ServingDir> dirs;
  if (!model_dir.empty()) dirs.push_back({"", model_dir, model_version});
  for (const auto& [task, adapter] : adapters) dirs.push_back({task, adapter.dir, adapter.version});
  return dirs;
}

std::string ServingState::describe() const {
  std::string text = std::filesystem::path(model_path).filename().string();
  if (!model_version.empty()) text += "@" + model_version;
  for (const auto& [task, adapter] : adapters) {
    text += " + " + task + (adapter.version.empty() ? "" : "@" + adapter.version);
  }
  return text;
}

nlohmann::json ServingState::to_json() const {
  nlohmann::json adapters_json = nlohmann::json::object();
  for (const auto& [task, adapter] : adapters) {
    adapters_json[task] = {{"dir", adapter.dir}, {"scale", adapter.scale}, {"version", adapter.version}};
  }
  nlohmann::json json = {{"model_path", model_path}, {"adapters", std::move(adapters_json)}};
  if (!model_dir.empty()) json["model_dir"] = model_dir;
  if (!model_version.empty()) json["model_version"] = model_version;
  return json;
}

Result<ServingState> ServingState::from_json(const nlohmann::json& json) {
  auto text = [&json](const char* field, std::string& out, bool required) -> Status {
    if (!json.contains(field)) {
      if (required) return Error{"history_invalid", std::string("serving state: ") + field + " is missing"};
      return Ok{};
    }
    if (!json[field].is_string()) return Error{"history_invalid", std::string("serving state: ") + field + " is not a string"};
    out = json[field].get<std::string>();
    return Ok{};
  };
  if (!json.is_object()) return Error{"history_invalid", "serving state is not an object"};
  ServingState state;
  if (auto s = text("model_path", state.model_path, true); !s) return s.error();
  if (auto s = text("model_dir", state.model_dir, false); !s) return s.error();
  if (auto s = text("model_version", state.model_version, false); !s) return s.error();
  if (json.contains("adapters")) {
    if (!json["adapters"].is_object()) return Error{"history_invalid", "serving state: adapters is not an object"};
    for (const auto& [task, entry] : json["adapters"].items()) {
      if (!entry.is_object() || !entry.contains("dir") || !entry["dir"].is_string()) {
        return Error{"history_invalid", "serving state: adapters." + task + ".dir is missing"};
      }
      ServingAdapter adapter;
      adapter.dir = entry["dir"].get<std::string>();
      if (entry.contains("scale") && entry["scale"].is_number()) adapter.scale = entry["scale"].get<double>();
      if (entry.contains("version") && entry["version"].is_string()) adapter.version = entry["version"].get<std::string>();
      state.adapters[task] = std::move(adapter);
    }
  }
  return state;
}

ServingState ServingState::from_config(const EdgeLlmConfig& config) {
  ServingState state;
  state.model_path = config.model_path;
  for (const auto& [task, adapter] : config.adapters) state.adapters[task] = {adapter.dir, adapter.scale, {}};
  return state;
}

}  // namespace hengshi::edge
