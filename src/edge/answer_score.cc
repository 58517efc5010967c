#include "edge/answer_score.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <cstdint>
#include <unordered_map>

namespace hengshi::edge {

std::vector<std::string> mixed_segments(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) out.push_back(std::move(word));
    word.clear();
  };
  std::int32_t at = 0;
  const auto length = static_cast<std::int32_t>(text.size());
  while (at < length) {
    const std::int32_t start = at;
    UChar32 c = 0;
    U8_NEXT(text.data(), at, length, c);
    if (c >= 0 && c < 0x80) {
      if (u_isalnum(c)) {
        word.push_back(static_cast<char>(u_tolower(c)));
      } else {
        flush();  // ASCII space and punctuation end a word and are dropped
      }
      continue;
    }
    flush();
    if (c < 0) {
      out.emplace_back("\xEF\xBF\xBD");  // an invalid byte counts as one replacement character
    } else if (u_isalnum(c)) {
      out.emplace_back(text.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(at - start)));
    }
  }
  flush();
  return out;
}

double char_f1(std::string_view predicted, std::string_view expected) {
  const auto predicted_tokens = mixed_segments(predicted);
  const auto expected_tokens = mixed_segments(expected);
  if (predicted_tokens.empty() || expected_tokens.empty()) {
    return predicted_tokens.size() == expected_tokens.size() ? 1.0 : 0.0;
  }
  std::unordered_map<std::string, int> expected_counts;
  for (const auto& token : expected_tokens) ++expected_counts[token];
  int common = 0;
  for (const auto& token : predicted_tokens) {
    if (auto found = expected_counts.find(token); found != expected_counts.end() && found->second > 0) {
      --found->second;
      ++common;
    }
  }
  if (common == 0) return 0.0;
  const double precision = double(common) / double(predicted_tokens.size());
  const double recall = double(common) / double(expected_tokens.size());
  return 2 * precision * recall / (precision + recall);
}

bool same_answer(std::string_view predicted, std::string_view expected) {
  auto trimmed = [](std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return std::string_view();
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  };
  return trimmed(predicted) == trimmed(expected);
}

}  // namespace hengshi::edge
