#include "router/sensitive_signals.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <span>
#include <utility>

namespace hengshi::router {

struct SensitiveSignals::CompiledSet {
  explicit CompiledSet(const RE2::Options& options) : set(options, RE2::UNANCHORED) {}
  RE2::Set set;
};

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
// RE2's \b is ASCII: CJK characters count as non-word, so "我要complaint" still hits.
bool is_ascii_word_char(char c) { return is_ascii_letter(c) || (c >= '0' && c <= '9') || c == '_'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// `keyword` is trimmed and non-empty. See the header for the rules this encodes.
std::string keyword_regex(std::string_view keyword) {
  std::string regex = "(?i)";
  if (is_ascii_word_char(keyword.front())) regex += "\\b";
  std::size_t pos = 0;
  while (pos < keyword.size()) {
    if (is_space(keyword[pos])) {
      while (is_space(keyword[pos])) ++pos;  // the keyword is trimmed: a word follows
      regex += "\\s+";
      continue;
    }
    std::size_t end = pos;
    while (end < keyword.size() && !is_space(keyword[end])) ++end;
    regex += RE2::QuoteMeta(keyword.substr(pos, end - pos));
    pos = end;
  }
  if (is_ascii_letter(keyword.back())) {
    regex += "(?:s|es)?\\b";
  } else if (is_ascii_word_char(keyword.back())) {
    regex += "\\b";
  }
  return regex;
}

}  // namespace

SensitiveSignals::SensitiveSignals(std::vector<SensitiveRule> rules, std::vector<Entry> entries,
                                   std::shared_ptr<const CompiledSet> set)
    : rules_(std::move(rules)), entries_(std::move(entries)), set_(std::move(set)) {}

Result<SensitiveSignals> SensitiveSignals::create(std::vector<SensitiveRule> rules) {
  RE2::Options options;
  options.set_log_errors(false);
  auto set = std::make_shared<CompiledSet>(options);
  for (std::string_view cue : complexity_cue_patterns()) {
    std::string error;
    if (set->set.Add(cue, &error) < 0) {
      return Error{"config_invalid", "complexity cue pattern: " + error};
    }
  }
  std::vector<Entry> entries;

  for (std::size_t i = 0; i < rules.size(); ++i) {
    const SensitiveRule& rule = rules[i];
    const std::string where = "sensitive[" + std::to_string(i) + "] (" + rule.name + ").";
    const auto invalid = [&](std::string_view field, std::string_view why) {
      std::string message = where;
      message.append(field).append(": ").append(why);
      return Error{"config_invalid", std::move(message)};
    };
    if (rule.name.empty()) return invalid("name", "must not be empty");
    for (std::size_t j = 0; j < i; ++j) {
      if (rules[j].name == rule.name) {
        return invalid("name", "duplicate of sensitive[" + std::to_string(j) + "]");
      }
    }
    if (rule.target != "human" && rule.target != "cloud-large") {
      return invalid("target", R"(must be "human" or "cloud-large", got ")" + rule.target + '"');
    }
    if (rule.keywords.empty() && rule.patterns.empty()) {
      return invalid("keywords", "a rule needs at least one keyword or pattern");
    }

    for (std::size_t j = 0; j < rule.keywords.size(); ++j) {
      const std::string field = "keywords[" + std::to_string(j) + "]";
      const std::string_view keyword = trim(rule.keywords[j]);
      if (keyword.empty()) return invalid(field, "must not be empty");
      std::string error;
      if (set->set.Add(keyword_regex(keyword), &error) < 0) return invalid(field, error);
      entries.push_back({i, false, j});
    }
    for (std::size_t j = 0; j < rule.patterns.size(); ++j) {
      const std::string field = "patterns[" + std::to_string(j) + "]";
      const RE2 regex(rule.patterns[j], options);
      if (!regex.ok()) return invalid(field, regex.error());
      // Such a pattern would fire on every request.
      if (RE2::FullMatch("", regex)) return invalid(field, "matches the empty string");
      std::string error;
      if (set->set.Add(rule.patterns[j], &error) < 0) return invalid(field, error);
      entries.push_back({i, true, j});
    }
  }

  if (!set->set.Compile()) {
    return Error{"config_invalid",
                 "sensitive: the keyword and pattern lists exceed RE2's memory budget"};
  }
  return SensitiveSignals(std::move(rules), std::move(entries), std::move(set));
}

std::optional<SignalMatch> SensitiveSignals::match(std::string_view text) const {
  ComplexityFeatures unused;
  return entries_.empty() ? std::nullopt : match(text, unused);
}

std::optional<SignalMatch> SensitiveSignals::match(std::string_view text,
                                                   ComplexityFeatures& features) const {
  // Which patterns matched allocates RE2's match set; whether any did allocates nothing, and
  // most requests match none.
  if (!set_->set.Match(text, nullptr)) return std::nullopt;
  std::vector<int> hits;
  if (!set_->set.Match(text, &hits)) return std::nullopt;
  // The cue patterns come first in the set; then the entries, added rule by rule, keywords
  // first: the smallest entry index is the first rule.
  const auto cues = static_cast<int>(complexity_cue_patterns().size());
  std::sort(hits.begin(), hits.end());
  const auto first_entry = std::lower_bound(hits.begin(), hits.end(), cues);
  add_complexity_cues(
      std::span<const int>(hits.data(), static_cast<std::size_t>(first_entry - hits.begin())),
      features);
  if (first_entry == hits.end()) return std::nullopt;
  const Entry& entry = entries_[static_cast<std::size_t>(*first_entry - cues)];
  const SensitiveRule& rule = rules_[entry.rule];
  return SignalMatch{rule.name, rule.target,
                     entry.is_pattern ? rule.patterns[entry.index] : rule.keywords[entry.index]};
}

std::vector<SensitiveRule> SensitiveSignals::defaults() {
  // Keyword tables read better packed, Chinese then English, than one keyword per line.
  // clang-format off
  return {
      {"complaint",
       {"投诉", "举报", "差评", "曝光", "维权", "消协", "消费者协会", "12315",
        "complaint", "complain", "complained", "complaining"},
       {},
       "human"},
      {"human_handoff",
       {"转人工", "人工客服", "人工服务", "找人工", "接人工", "真人客服",
        "human agent", "live agent", "real person", "speak to a human", "talk to a human",
        "speak to an agent", "talk to an agent", "speak to a representative",
        "talk to a representative", "speak to someone", "talk to someone"},
       {},
       "human"},
      {"fraud_security",
       {"诈骗", "盗刷", "被盗", "被骗", "骗子", "冒用", "钓鱼", "洗钱", "账户异常", "异地登录",
        "fraud", "fraudulent", "scam", "scammed", "phishing", "stolen card", "card was stolen",
        "identity theft", "hacked", "unauthorized", "unauthorised", "money laundering"},
       {},
       "cloud-large"},
  };
  // clang-format on
}

}  // namespace hengshi::router
