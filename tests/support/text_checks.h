// Small checks on text that several test files share (one definition each: test files are
// compiled in unity batches, where two file-local helpers of the same name collide).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hengshi::testing {

inline bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Valid UTF-8 the way nlohmann's strict dump() checks it: it throws on anything else.
inline bool dumps_strictly(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// The pieces one after another (a stream's deltas as the whole text).
inline std::string concat(const std::vector<std::string>& pieces) {
  std::string all;
  for (const auto& piece : pieces) all += piece;
  return all;
}

}  // namespace hengshi::testing
