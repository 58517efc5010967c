// Reading JSON Lines data files (training rows, FAQ tables, calibration rows): one object per
// line, blank lines skipped, every error naming the file and the 1-based line — so a user can
// fix their data without guessing. Errors are Error{"data_invalid", "<path>:<line>: why"}.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace hengshi {

// `line` 0 = the whole file (no line number in the message).
Error data_error(const std::string& path, std::size_t line, std::string_view why);

bool is_blank(std::string_view text);

// Reads a required, non-blank string field into `out`; returns why not, or "" when it is fine.
std::string required_string(const nlohmann::json& row, std::string_view field, std::string& out);

// Calls on_row(row, line) for each non-blank line, which returns why the row is bad or "".
// Stops at the first error; a file without rows is an error too.
using JsonRowHandler = std::function<std::string(const nlohmann::json& row, std::size_t line)>;
Status for_each_json_line(const std::string& path, const JsonRowHandler& on_row);

}  // namespace hengshi
