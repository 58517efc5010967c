#include "edge/intent_dataset.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace hengshi::edge {
namespace {

Error data_error(const std::filesystem::path& path, std::size_t line, std::string_view why) {
  std::string message = path.string();
  if (line > 0) message += ":" + std::to_string(line);
  message += ": ";
  message += why;
  return Error{"data_invalid", std::move(message)};
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Reads a required non-empty string field; returns an error message or "" on success.
std::string required_string(const nlohmann::json& row, std::string_view field, std::string& out) {
  const auto it = row.find(field);
  if (it == row.end()) return "missing field \"" + std::string(field) + "\"";
  if (!it->is_string()) return "field \"" + std::string(field) + "\" is not a string";
  out = it->get<std::string>();
  if (is_blank(out)) return "field \"" + std::string(field) + "\" is empty";
  return {};
}

std::string check_intent_name(std::string_view intent) {
  // fastText labels are whitespace-separated tokens; a space would silently split the label.
  if (intent.find_first_of(" \t\r\n\v\f") != std::string_view::npos) {
    return "intent \"" + std::string(intent) + "\" contains white space";
  }
  return {};
}

// Calls on_row(json, line_number) for each non-blank line; stops at the first error.
template <typename OnRow>
Status for_each_json_line(const std::filesystem::path& path, OnRow&& on_row) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return data_error(path, 0, "cannot open file");
  std::string line;
  std::size_t line_number = 0;
  std::size_t rows = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (is_blank(line)) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded()) return data_error(path, line_number, "invalid JSON");
    if (!row.is_object()) return data_error(path, line_number, "row is not a JSON object");
    if (std::string why = on_row(row, line_number); !why.empty()) {
      return data_error(path, line_number, why);
    }
    ++rows;
  }
  if (rows == 0) return data_error(path, 0, "file is empty (no JSON rows)");
  return Ok{};
}

}  // namespace

Result<std::vector<IntentExample>> read_intent_examples(const std::filesystem::path& path) {
  std::vector<IntentExample> examples;
  Status status = for_each_json_line(path, [&](const nlohmann::json& row, std::size_t line) {
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
  Status status = for_each_json_line(path, [&](const nlohmann::json& row, std::size_t) {
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
