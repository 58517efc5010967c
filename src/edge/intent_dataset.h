// Reading intent training rows and FAQ answer tables (JSON Lines). Every error names the file
// and, where there is one, the 1-based line, so a user can fix the data without guessing.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

// The intent that marks out-of-scope rows: the model learns to predict it, the edge never
// answers it.
inline constexpr std::string_view kOutOfScopeIntent = "__oos__";

struct IntentExample {
  std::string text;
  std::string intent;
  std::string answer;    // optional canned answer for the intent; empty when absent
  std::size_t line = 0;  // 1-based line in the source file
};

// Rows {"text", "intent", "answer"?}. Blank lines are skipped. Errors (code "data_invalid"):
// unreadable or empty file, invalid JSON, a row that is not an object, "text"/"intent" missing,
// not a string or empty, an intent containing white space, "answer" present but not a string.
Result<std::vector<IntentExample>> read_intent_examples(const std::filesystem::path& path);

// Rows {"intent", "answer"}: the FAQ given with `--answers FILE`. Same error rules; a repeated
// intent is an error (which answer was meant is ambiguous).
Result<std::map<std::string, std::string>> read_answer_table(const std::filesystem::path& path);

}  // namespace hengshi::edge
