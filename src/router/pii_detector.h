// PII detection for Chinese and English text. The router pins every request that contains PII to
// the edge model so it never reaches a cloud API: a false positive costs a cloud answer, a false
// negative leaks data, so the rules lean towards reporting.
//
// A PiiDetector is immutable after create(): every method is const and safe to call from many
// threads at once; copies share the compiled patterns.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace re2 {
class RE2;
}

namespace hengshi::router {

// An operator-supplied pattern: RE2 syntax, UTF-8, case-sensitive unless it says (?i).
struct PiiPattern {
  std::string name;
  std::string regex;
};

struct PiiConfig {
  bool enabled = true;               // false: nothing is detected (patterns are still validated)
  std::vector<PiiPattern> patterns;  // reported as kind "custom:<name>"
};

// One detected item; offset and length are in bytes of the input.
struct PiiMatch {
  std::string kind;  // "mobile_cn", "id_cn", "bank_card", "email" or "custom:<name>"
  std::size_t offset = 0;
  std::size_t length = 0;

  bool operator==(const PiiMatch&) const = default;
};

// Built-in kinds (digits may be ASCII or full-width ０-９; "+" and "X" may be full-width too; no
// item may be part of a longer run of digits). Groups of digits are joined by 1-4 separators in
// any mix: spaces (ASCII, tab, no-break, ideographic), dashes (ASCII, full-width, U+2010-2015,
// minus) and, for mobile_cn only, dots (. ． ｡ · ・):
//   mobile_cn  mainland mobile 1[3-9] + 9 digits, grouped 11, 3-4-4, 7-4 or 3-8
//              ("138.1234.5678", "138  1234-5678", "1381234 5678"), optionally after +86 / 0086 /
//              86 (glued, or as its own group)
//   id_cn      18-char resident ID (17 digits + digit or X), MOD 11-2 checksum and a real birth
//              date 1900-01-01..2099-12-31 at positions 7-14; may be grouped like a card
//   bank_card  13-19 digits, possibly in groups, Luhn-valid and not an id_cn (Luhn passes 1 in
//              10 random numbers: long order numbers can hit)
//   email      local@domain.tld in any script (张三@example.com, ü@例子.com), "@" and dots
//              possibly full-width (＠ ﹫, ． ｡ 。); the TLD is 2+ letters, CJK ones only after
//              "." or "．" ("foo@bar。谢谢" ends a sentence)
// A digit sequence is read group by group from the left; at each group the first of id_cn,
// mobile_cn, bank_card (longest) that fits is taken, so "13812345678 13987654321" is two mobiles.
// A number spans at most 5 groups (a card written 4-4-4-4-3). Text split across several strings
// (content parts) is only seen whole if the caller joins it.
class PiiDetector {
 public:
  // Compiles the built-in and configured patterns. Errors (code "config_invalid", message
  // "patterns[i] (name): why"): empty name, duplicate name, invalid regex (RE2's error), a regex
  // that matches the empty string.
  static Result<PiiDetector> create(const PiiConfig& config);

  // All matches, in order of offset. Overlaps are resolved to the earliest, then the longest
  // match ("13812345678@qq.com" is one email), so the matches never overlap.
  std::vector<PiiMatch> find(std::string_view text) const;

  // Same answer as !find(text).empty(), but stops at the first match and allocates nothing.
  bool contains(std::string_view text) const;

  // The text with each match replaced by "[kind]", for logs.
  std::string redact(std::string_view text) const;

  // false when the policy turned detection off (find() then reports nothing).
  bool enabled() const { return enabled_; }

 private:
  struct CustomPattern {
    std::string kind;                       // "custom:<name>"
    std::shared_ptr<const re2::RE2> regex;  // shared_ptr: copies share one compiled regex
  };

  PiiDetector(bool enabled, std::shared_ptr<const re2::RE2> email,
              std::vector<CustomPattern> custom);

  // Calls on_match(kind, offset, length) for every raw match (possibly overlapping across
  // kinds) until it returns false. Defined in the .cc file, the only place it is used.
  template <typename OnMatch>
  void for_each_match(std::string_view text, OnMatch&& on_match) const;

  bool enabled_ = true;
  std::shared_ptr<const re2::RE2> email_;
  std::vector<CustomPattern> custom_;
};

}  // namespace hengshi::router
