#include "edge/intent_dataset.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/json_lines.h"

namespace hengshi::edge {
namespace {

std::string check_intent_name(std::string_view intent) {
  // fastText labels are whitespace-separated tokens; a space would silently split the label.
  if (intent.find_first_of(" \t\r\n\v\f") != std::string_view::npos) {
    return "intent \"" + std::string(intent) + "\" contains white space";
  }
  return {};
}

}  // namespace

Result<std::vector<IntentExample>> read_intent_examples(const std::filesystem::path& path) {
  std::vector<IntentExample> examples;
  Status status = for_each_json_line(path.string(), [&](const nlohmann::json& row, std::size_t line) {
    IntentExample example;
    example.line = line;
    if (std::string why = required_string(row, "text", example.text); !why.empty()) return why;
    if (std::string why = required_string(row, "intent", example.intent); !why.empty()) return why;
    if (std::string why = check_intent_name(example.intent); !why.empty()) return why;
    if (const auto it = row.find("answer"); it != row.end() && !it->is_null()) {
      if (!it->is_string()) return std::string("field \"answer\" is not a string");
      example.answer = it->get<std::string>();
    }
    examples.push_back(std::move(example));
    return std::string();
  });
  if (!status) return status.error();
  return examples;
}

Result<std::map<std::string, std::string>> read_answer_table(const std::filesystem::path& path) {
  std::map<std::string, std::string> answers;
  Status status = for_each_json_line(path.string(), [&](const nlohmann::json& row, std::size_t) {
    std::string intent;
    std::string answer;
    if (std::string why = required_string(row, "intent", intent); !why.empty()) return why;
    if (std::string why = check_intent_name(intent); !why.empty()) return why;
    if (std::string why = required_string(row, "answer", answer); !why.empty()) return why;
    if (!answers.emplace(intent, std::move(answer)).second) {
      return "intent \"" + intent + "\" has a second answer";
    }
    return std::string();
  });
  if (!status) return status.error();
  return answers;
}

}  // namespace hengshi::edge
