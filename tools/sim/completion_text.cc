#include "sim/completion_text.h"

#include <algorithm>
#include <array>
#include <utility>

namespace hengshi::sim {
namespace {

constexpr std::array<std::string_view, 16> kFiller = {
    "lorem", "ipsum", "dolor",   "sit",    "amet",       "consectetur", "adipiscing", "elit",
    "sed",   "do",    "eiusmod", "tempor", "incididunt", "ut",          "labore",     "magna"};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

template <typename Visit>
void for_each_word(std::string_view text, Visit&& visit) {
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start && !visit(text.substr(start, i - start))) return;
  }
}

}  // namespace

std::int64_t count_words(std::string_view text) {
  std::int64_t count = 0;
  for_each_word(text, [&count](std::string_view) {
    ++count;
    return true;
  });
  return count;
}

std::vector<std::string> completion_words(std::string_view sim_name, std::string_view model,
                                          std::string_view last_user_text, std::int64_t tokens) {
  auto wanted = static_cast<std::size_t>(std::max<std::int64_t>(1, tokens));
  std::vector<std::string> words;
  words.reserve(wanted);
  std::string tag;
  tag.reserve(sim_name.size() + model.size() + 3);
  tag.append("[").append(sim_name).append("/").append(model).append("]");
  words.push_back(std::move(tag));
  for_each_word(last_user_text, [&](std::string_view word) {
    if (words.size() >= wanted) return false;
    words.emplace_back(word);
    return true;
  });
  for (std::size_t i = 0; words.size() < wanted; ++i) {
    words.emplace_back(kFiller[i % kFiller.size()]);
  }
  return words;
}

}  // namespace hengshi::sim
