#include "core/json_lines.h"

#include <fstream>

namespace hengshi {

Error data_error(const std::string& path, std::size_t line, std::string_view why) {
  std::string message = path;
  if (line > 0) message += ":" + std::to_string(line);
  message += ": ";
  message += why;
  return Error{"data_invalid", std::move(message)};
}

bool is_blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n\v\f") == std::string_view::npos;
}

std::string required_string(const nlohmann::json& row, std::string_view field, std::string& out) {
  const auto it = row.find(field);
  if (it == row.end()) return "missing field \"" + std::string(field) + "\"";
  if (!it->is_string()) return "field \"" + std::string(field) + "\" is not a string";
  out = it->get<std::string>();
  if (is_blank(out)) return "field \"" + std::string(field) + "\" is empty";
  return {};
}

Status for_each_json_line(const std::string& path, const JsonRowHandler& on_row) {
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
    if (std::string why = on_row(row, line_number); !why.empty()) return data_error(path, line_number, why);
    ++rows;
  }
  if (in.bad()) return data_error(path, line_number, "read error");
  if (rows == 0) return data_error(path, 0, "file is empty (no JSON rows)");
  return Ok{};
}

}  // namespace hengshi
