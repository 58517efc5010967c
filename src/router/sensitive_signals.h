// Sensitive signals: operator-configured keyword and pattern lists that send a request to a fixed
// target whatever the other router stages say (complaints and hand-off requests to a human,
// fraud and security reports to the large cloud model).
//
// Matching rules:
//   keywords  case-insensitive (ASCII and other cased scripts); CJK is a plain substring.
//             A keyword that starts or ends with an ASCII letter or digit must start or end on
//             a word boundary there, and a final letter may take a plural "s"/"es":
//             "agent" hits "Agents" and "agent!" but not "agency" or "reagent"; "fraud" hits
//             "Fraud!" but not "defraudation". Spaces inside a keyword match any run of white
//             space. Other inflections ("hacked") are separate keywords.
//   patterns  RE2 syntax, UTF-8, case-sensitive unless the pattern says (?i).
//
// The compiled set also holds the complexity cue patterns (router/complexity.h): match() with
// features reads both in one pass over the text, which the router makes over the last user text
// for every request (an RE2::Set pass costs about 700 instructions plus 18 a byte).
//
// A SensitiveSignals is immutable after create(): every method is const and safe to call from
// many threads at once; copies share the compiled matcher.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "router/complexity.h"

namespace hengshi::router {

struct SensitiveRule {
  std::string name;
  std::vector<std::string> keywords;
  std::vector<std::string> patterns;
  std::string target;  // "human" or "cloud-large"
};

struct SignalMatch {
  std::string rule;     // the rule's name
  std::string target;   // the rule's target
  std::string matched;  // the keyword or pattern text that hit, as configured

  bool operator==(const SignalMatch&) const = default;
};

class SensitiveSignals {
 public:
  // Errors (code "config_invalid", message "sensitive[i] (name).field: why"): empty name,
  // duplicate name, target not human|cloud-large, a rule with no keywords and no patterns, an
  // empty (or all-space) keyword, an invalid regex, a regex that matches the empty string.
  // No rules is valid: nothing ever matches.
  static Result<SensitiveSignals> create(std::vector<SensitiveRule> rules);

  // The first rule, in config order, with a keyword or pattern in `text`; within that rule
  // `matched` is its first keyword (in order), else its first pattern, that hits. All keywords
  // and patterns of all rules run as one RE2::Set: one pass over the text.
  std::optional<SignalMatch> match(std::string_view text) const;
  // The same, and the complexity cues in `text` added to `features` (add_complexity_cues()), from
  // the same pass: with complexity_features_without_cues(text, …) it gives complexity_features().
  std::optional<SignalMatch> match(std::string_view text, ComplexityFeatures& features) const;

  const std::vector<SensitiveRule>& rules() const { return rules_; }

  // Built-ins, in this order: complaint → human, human_handoff → human,
  // fraud_security → cloud-large.
  static std::vector<SensitiveRule> defaults();

 private:
  struct CompiledSet;  // wraps RE2::Set, kept out of this header
  // One entry of the set, in the order added after the complexity cue patterns: rule by rule,
  // keywords then patterns.
  struct Entry {
    std::size_t rule = 0;
    bool is_pattern = false;
    std::size_t index = 0;  // into the rule's keywords or patterns
  };

  SensitiveSignals(std::vector<SensitiveRule> rules, std::vector<Entry> entries,
                   std::shared_ptr<const CompiledSet> set);

  std::vector<SensitiveRule> rules_;
  std::vector<Entry> entries_;
  std::shared_ptr<const CompiledSet> set_;  // the cue patterns, then the entries
};

}  // namespace hengshi::router
