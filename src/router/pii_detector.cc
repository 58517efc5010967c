#include "router/pii_detector.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "core/byte_word.h"

namespace hengshi::router {
namespace {

// Digit sequences are found by a byte loop and validated in C++ rather than by RE2: the loop is
// cheaper than a regex pass, and the checksums need code anyway.
// The checksums (MOD 11-2, Luhn) are hand-written: Debian packages no library for them.

constexpr std::string_view kMobileKind = "mobile_cn";
constexpr std::string_view kIdKind = "id_cn";
constexpr std::string_view kCardKind = "bank_card";
constexpr std::string_view kEmailKind = "email";

// Internationalised addresses (RFC 6531): the local part and the domain may be in any script,
// the "@" and the dots full-width (＠ ﹫, ． ｡ 。) as Chinese IMEs type them. Chinese text has no
// spaces, so a local part is either a run of CJK characters or a run of other letters, digits
// and ._%+- ("邮箱zhangsan@…" starts at "z"; "联系张三@…" is reported from "联", which only
// over-redacts). The TLD needs two letters; CJK ones only after "." or "．" (so "a@b。谢谢", a
// sentence ending, is not an email); "a@b" is not an email.
constexpr std::string_view kEmailRegex =
    R"((?:[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+)"
    R"(|(?:[^\P{L}\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]|[\p{N}\p{M}._%+\-．＿＋－])+))"
    R"([@＠﹫])"
    R"((?:[\p{L}\p{M}\p{N}\-－]+[.．｡。])*[\p{L}\p{M}\p{N}\-－]+)"
    R"((?:[.．｡。][^\P{L}\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]{2,})"
    R"(|[.．][\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]{2,}))";
// Bytes that start an "@" of any width: the email regex only runs on text that has one.
constexpr std::string_view kFullWidthAt = "\xEF\xBC\xA0";  // ＠ U+FF20
constexpr std::string_view kSmallAt = "\xEF\xB9\xAB";      // ﹫ U+FE6B

// The longest built-in number: a 19-digit card.
constexpr int kMaxItemDigits = 19;
// The most groups one number spans: a card written 4-4-4-4-3. Bounding it keeps a long run of
// short groups ("1 2 3 4 …") linear to scan.
constexpr int kMaxItemGroups = 5;
// The most separator characters between two groups of one number: "138 - 1234 - 5678" needs 3.
constexpr int kMaxJoinChars = 4;

// kSeparator joins the groups of any number (spaces and dashes of every width); kDot only those
// of a phone number ("138.1234.5678"): a card or ID is not written so, and decimals would join.
enum class Glyph { kDigit, kSeparator, kDot, kPlus, kCheckX, kOther };

// One character of a number, ASCII or its full-width form (Chinese IMEs type those).
struct NumberChar {
  Glyph glyph = Glyph::kOther;
  std::uint8_t digit = 0;
  std::size_t length = 1;  // bytes; kOther steps one byte, which never lands on a digit
};

NumberChar read_number_char(std::string_view text, std::size_t pos) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (byte >= '0' && byte <= '9') {
    return {Glyph::kDigit, static_cast<std::uint8_t>(byte - '0'), 1};
  }
  switch (byte) {
    case ' ':
    case '\t':
    case '-':
      return {Glyph::kSeparator, 0, 1};
    case '.':
      return {Glyph::kDot, 0, 1};
    case '+':
      return {Glyph::kPlus, 0, 1};
    case 'X':
    case 'x':
      return {Glyph::kCheckX, 0, 1};
    default:
      break;
  }
  if (byte == 0xC2 && pos + 2 <= text.size()) {
    const auto second = static_cast<unsigned char>(text[pos + 1]);
    if (second == 0xA0) return {Glyph::kSeparator, 0, 2};  // no-break space U+00A0
    if (second == 0xB7) return {Glyph::kDot, 0, 2};        // middle dot · U+00B7
    return {};
  }
  if (pos + 3 > text.size() || (byte != 0xEF && byte != 0xE3 && byte != 0xE2)) return {};
  const auto second = static_cast<unsigned char>(text[pos + 1]);
  const auto third = static_cast<unsigned char>(text[pos + 2]);
  if (byte == 0xEF && second == 0xBC) {
    if (third >= 0x90 && third <= 0x99) {  // ０-９ U+FF10..U+FF19
      return {Glyph::kDigit, static_cast<std::uint8_t>(third - 0x90), 3};
    }
    if (third == 0x8D) return {Glyph::kSeparator, 0, 3};  // － U+FF0D
    if (third == 0x8E) return {Glyph::kDot, 0, 3};        // ． U+FF0E
    if (third == 0x8B) return {Glyph::kPlus, 0, 3};       // ＋ U+FF0B
    if (third == 0xB8) return {Glyph::kCheckX, 0, 3};     // Ｘ U+FF38
  }
  if (byte == 0xEF && second == 0xBD && third == 0x98) return {Glyph::kCheckX, 0, 3};  // ｘ
  if (byte == 0xEF && second == 0xBD && third == 0xA1) return {Glyph::kDot, 0, 3};     // ｡
  if (byte == 0xE3 && second == 0x80 && third == 0x80) {
    return {Glyph::kSeparator, 0, 3};  // ideographic space U+3000
  }
  if (byte == 0xE3 && second == 0x83 && third == 0xBB) return {Glyph::kDot, 0, 3};  // ・ U+30FB
  if (byte == 0xE2 && second == 0x80 && third >= 0x90 && third <= 0x95) {
    return {Glyph::kSeparator, 0, 3};  // hyphens and dashes U+2010..U+2015
  }
  if (byte == 0xE2 && second == 0x88 && third == 0x92) return {Glyph::kSeparator, 0, 3};  // −
  return {};
}

bool is_digit_at(std::string_view text, std::size_t pos) {
  return pos < text.size() && read_number_char(text, pos).glyph == Glyph::kDigit;
}

// Where a maximal run of digits lies; byte offsets.
struct GroupSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
  int digits = 0;
  std::size_t x_end = 0;  // end of a check 'X' right after the digits; 0 when there is none
  bool dotted_join = false;  // the separators to the next group include a dot (phones only)
};

struct DigitGroup {
  GroupSpan span;
  // Where the next group begins when 1..kMaxJoinChars separators join it to this one; 0 when
  // none do.
  std::size_t next_begin = 0;
  std::array<std::uint8_t, kMaxItemDigits> values{};  // the first kMaxItemDigits digits
};

DigitGroup read_group(std::string_view text, std::size_t pos) {
  DigitGroup group;
  group.span.begin = group.span.end = pos;
  while (group.span.end < text.size()) {
    const NumberChar next = read_number_char(text, group.span.end);
    if (next.glyph != Glyph::kDigit) break;
    if (group.span.digits < kMaxItemDigits) {
      group.values[static_cast<std::size_t>(group.span.digits)] = next.digit;
    }
    ++group.span.digits;
    group.span.end += next.length;
  }
  if (group.span.end >= text.size()) return group;
  const NumberChar after = read_number_char(text, group.span.end);
  if (after.glyph == Glyph::kCheckX) {
    group.span.x_end = group.span.end + after.length;  // an X ends the number
    return group;
  }
  // Any mix of separators joins ("138 - 1234", "138  1234", "138．1234"), up to a few.
  std::size_t join_end = group.span.end;
  bool dotted = false;
  for (int joins = 0; joins < kMaxJoinChars && join_end < text.size(); ++joins) {
    const NumberChar next = read_number_char(text, join_end);
    if (next.glyph != Glyph::kSeparator && next.glyph != Glyph::kDot) break;
    dotted = dotted || next.glyph == Glyph::kDot;
    join_end += next.length;
  }
  if (join_end != group.span.end && is_digit_at(text, join_end)) {
    group.next_begin = join_end;
    group.span.dotted_join = dotted;
  }
  return group;
}

// The joined groups of one sequence not yet consumed, oldest first: each group is read once.
class GroupQueue {
 public:
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == kMaxItemGroups; }
  std::size_t size() const { return size_; }
  const DigitGroup& operator[](std::size_t i) const { return groups_[(head_ + i) & kMask]; }
  const DigitGroup& front() const { return (*this)[0]; }
  const DigitGroup& back() const { return (*this)[size_ - 1]; }
  void push_back(const DigitGroup& group) { groups_[(head_ + size_++) & kMask] = group; }
  void pop_front() {
    head_ = (head_ + 1) & kMask;
    --size_;
  }

 private:
  static constexpr std::size_t kCapacity = 8;  // a power of two ≥ kMaxItemGroups
  static constexpr std::size_t kMask = kCapacity - 1;
  std::array<DigitGroup, kCapacity> groups_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

// The leading groups of the queue that fit in the longest item, their digits concatenated.
struct DigitWindow {
  std::array<GroupSpan, kMaxItemGroups> groups{};
  std::array<std::uint8_t, kMaxItemDigits> digits{};
  int group_count = 0;
  int digit_count = 0;
};

DigitWindow make_window(const GroupQueue& queue) {
  DigitWindow window;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const DigitGroup& group = queue[i];
    if (window.digit_count + group.span.digits > kMaxItemDigits) break;
    std::copy_n(group.values.begin(), group.span.digits,
                window.digits.begin() + window.digit_count);
    window.digit_count += group.span.digits;
    window.groups[static_cast<std::size_t>(window.group_count++)] = group.span;
  }
  return window;
}

struct NumberItem {
  std::string_view kind;
  std::size_t begin = 0;
  std::size_t end = 0;
};

bool is_leap_year(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int number_at(const std::uint8_t* digits, int count) {
  int value = 0;
  for (int i = 0; i < count; ++i) value = value * 10 + digits[i];
  return value;
}

// digits: the first 17 digits; check: '0'..'9' or 'X'.
bool is_resident_id(const std::uint8_t* digits, char check) {
  static constexpr std::array<int, 17> kWeights = {7, 9, 10, 5,  8, 4, 2, 1, 6,
                                                   3, 7, 9,  10, 5, 8, 4, 2};
  static constexpr std::string_view kCheckChars = "10X98765432";  // indexed by sum mod 11
  int sum = 0;
  for (std::size_t i = 0; i < kWeights.size(); ++i) sum += digits[i] * kWeights[i];
  if (kCheckChars[static_cast<std::size_t>(sum % 11)] != check) return false;

  const int year = number_at(digits + 6, 4);
  const int month = number_at(digits + 10, 2);
  const int day = number_at(digits + 12, 2);
  if (year < 1900 || year > 2099 || month < 1 || month > 12 || day < 1) return false;
  static constexpr std::array<int, 12> kDaysInMonth = {31, 28, 31, 30, 31, 30,
                                                       31, 31, 30, 31, 30, 31};
  const int days = kDaysInMonth[static_cast<std::size_t>(month - 1)] +
                   (month == 2 && is_leap_year(year) ? 1 : 0);
  return day <= days;
}

bool is_luhn_valid(const std::uint8_t* digits, int count) {
  int sum = 0;
  for (int i = 0; i < count; ++i) {
    int digit = digits[count - 1 - i];
    if (i % 2 == 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 == 0;
}

// 17 digits + X, or 18 digits, over whole groups.
std::optional<NumberItem> match_resident_id(const DigitWindow& window) {
  int total = 0;
  for (int g = 0; g < window.group_count; ++g) {
    const GroupSpan& group = window.groups[static_cast<std::size_t>(g)];
    total += group.digits;
    const bool has_x = group.x_end != 0;
    if (total == 17 && has_x && is_resident_id(window.digits.data(), 'X')) {
      return NumberItem{kIdKind, window.groups[0].begin, group.x_end};
    }
    if (total == 18 && !has_x &&
        is_resident_id(window.digits.data(), static_cast<char>('0' + window.digits[17]))) {
      return NumberItem{kIdKind, window.groups[0].begin, group.end};
    }
    if (total >= 17 || group.dotted_join) break;
  }
  return std::nullopt;
}

bool digits_equal(const DigitWindow& window, int offset, std::string_view expected) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (window.digits[static_cast<std::size_t>(offset) + i] != expected[i] - '0') return false;
  }
  return true;
}

bool is_mobile_number(const DigitWindow& window, int offset) {
  const auto first = static_cast<std::size_t>(offset);
  return window.digits[first] == 1 && window.digits[first + 1] >= 3;
}

// The ways people group a mobile number: 11, 3-4-4, 7-4 (1381234 5678), 3-8 (138 12345678).
// Other splits ("13 812 345 678") are more likely lists of small numbers than a phone.
constexpr std::array<std::array<int, 3>, 4> kMobileShapes = {
    {{11, 0, 0}, {3, 4, 4}, {7, 4, 0}, {3, 8, 0}}};

// The index of the last group of a mobile number in one of kMobileShapes starting at group
// `first` (whose first digit is digits[offset]), or -1.
int mobile_last_group(const DigitWindow& window, int first, int offset) {
  if (first >= window.group_count) return -1;
  const auto group_digits = [&](int g) {
    return window.groups[static_cast<std::size_t>(g)].digits;
  };
  for (const auto& shape : kMobileShapes) {
    int g = first;
    for (const int digits : shape) {
      if (digits == 0) break;
      if (g >= window.group_count || group_digits(g) != digits) {
        g = -1;
        break;
      }
      ++g;
    }
    if (g > first) return is_mobile_number(window, offset) ? g - 1 : -1;
  }
  return -1;
}

std::size_t plus_length_before(std::string_view text, std::size_t pos) {
  if (pos >= 1 && text[pos - 1] == '+') return 1;
  if (pos >= 3 && text.substr(pos - 3, 3) == "\xEF\xBC\x8B") return 3;  // ＋
  return 0;
}

std::optional<NumberItem> match_mobile(const DigitWindow& window, std::string_view text) {
  if (window.group_count == 0) return std::nullopt;
  const GroupSpan& first = window.groups[0];
  const auto group_end = [&](int g) { return window.groups[static_cast<std::size_t>(g)].end; };
  if (const int last = mobile_last_group(window, 0, 0); last >= 0) {
    return NumberItem{kMobileKind, first.begin, group_end(last)};
  }
  // With a country code: glued (8613812345678) or as its own group (+86 138-1234-5678).
  const std::size_t begin = first.begin - plus_length_before(text, first.begin);
  if (first.digits == 13 && digits_equal(window, 0, "86") && is_mobile_number(window, 2)) {
    return NumberItem{kMobileKind, begin, first.end};
  }
  if (first.digits == 15 && digits_equal(window, 0, "0086") && is_mobile_number(window, 4)) {
    return NumberItem{kMobileKind, begin, first.end};
  }
  if ((first.digits == 2 && digits_equal(window, 0, "86")) ||
      (first.digits == 4 && digits_equal(window, 0, "0086"))) {
    if (const int last = mobile_last_group(window, 1, first.digits); last >= 0) {
      return NumberItem{kMobileKind, begin, group_end(last)};
    }
  }
  return std::nullopt;
}

// The longest Luhn-valid run of 13..19 digits over whole groups.
std::optional<NumberItem> match_bank_card(const DigitWindow& window) {
  std::optional<NumberItem> longest;
  int total = 0;
  for (int g = 0; g < window.group_count; ++g) {
    const GroupSpan& group = window.groups[static_cast<std::size_t>(g)];
    total += group.digits;
    if (total >= 13 && is_luhn_valid(window.digits.data(), total)) {
      longest = NumberItem{kCardKind, window.groups[0].begin, group.end};
    }
    if (group.dotted_join) break;
  }
  return longest;
}

// Whether the 8 bytes at `p` may hold a digit: true for any ASCII digit and any byte above 0x7F
// (a full-width digit starts with 0xEF; the caller then looks byte by byte).
bool may_hold_digit(const char* p) {
  const std::uint64_t word = load_word(p);
  return has_high_byte(word) || has_byte_between(word, '0' - 1, '9' + 1);
}

// Whether `text` may hold a built-in item: a number needs a digit (ASCII, or full-width after a
// non-ASCII lead byte) and an email an at sign ('@', or a full-width or small one, both
// non-ASCII). Most strings of a chat body (roles, keys, model names, plain prose) have none, and
// one pass over their words settles it.
bool may_hold_builtin_item(std::string_view text) {
  std::size_t pos = 0;
  for (; pos + 8 <= text.size(); pos += 8) {
    const std::uint64_t word = load_word(text.data() + pos);
    if (has_high_byte(word) || has_byte_between(word, '0' - 1, '9' + 1) || has_byte(word, '@')) return true;
  }
  for (; pos < text.size(); ++pos) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte >= 0x80 || (byte >= '0' && byte <= '9') || byte == '@') return true;
  }
  return false;
}

// The offset of the next digit at or after `pos`, or text.size().
std::size_t find_digit(std::string_view text, std::size_t pos) {
  while (pos + 8 <= text.size() && !may_hold_digit(text.data() + pos)) pos += 8;
  for (; pos < text.size(); ++pos) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte >= '0' && byte <= '9') return pos;
    if (byte == 0xEF && is_digit_at(text, pos)) return pos;  // 0xEF leads a full-width digit
  }
  return pos;
}

// Calls on_item for each number item, left to right, until it returns false.
template <typename OnItem>
bool for_each_number(std::string_view text, OnItem&& on_item) {
  // Most strings the walk reads (roles, names, prose) hold no digit: find that out before setting
  // up the queue, whose eight groups cost more to initialise than the search.
  std::size_t pos = find_digit(text, 0);
  if (pos >= text.size()) return true;
  GroupQueue queue;
  while (true) {
    if (queue.empty()) {
      pos = find_digit(text, pos);
      if (pos >= text.size()) return true;
      queue.push_back(read_group(text, pos));
    }
    while (!queue.full() && queue.back().next_begin != 0) {
      queue.push_back(read_group(text, queue.back().next_begin));
    }
    const DigitWindow window = make_window(queue);
    // Strongest evidence first: an ID is checksum + date, a mobile its shape, a card only Luhn.
    std::optional<NumberItem> item = match_resident_id(window);
    if (!item) item = match_mobile(window, text);
    if (!item) item = match_bank_card(window);
    if (!item) {
      pos = queue.front().span.end;
      queue.pop_front();
      continue;
    }
    if (!on_item(*item)) return false;
    pos = item->end;
    while (!queue.empty() && queue.front().span.end <= item->end) queue.pop_front();
  }
}

template <typename OnMatch>
bool for_each_regex_match(const RE2& regex, std::string_view kind, std::string_view text,
                          OnMatch& on_match) {
  std::size_t pos = 0;
  re2::StringPiece found;
  while (pos <= text.size() && regex.Match(text, pos, text.size(), RE2::UNANCHORED, &found, 1)) {
    const auto offset = static_cast<std::size_t>(found.data() - text.data());
    if (found.empty()) {  // create() rejects patterns matching "", but \b-like ones can remain
      pos = offset + 1;
      continue;
    }
    if (!on_match(kind, offset, found.size())) return false;
    pos = offset + found.size();
  }
  return true;
}

}  // namespace

PiiDetector::PiiDetector(bool enabled, std::shared_ptr<const re2::RE2> email,
                         std::vector<CustomPattern> custom)
    : enabled_(enabled), email_(std::move(email)), custom_(std::move(custom)) {}

Result<PiiDetector> PiiDetector::create(const PiiConfig& config) {
  RE2::Options options;
  options.set_log_errors(false);
  auto email = std::make_shared<const RE2>(kEmailRegex, options);

  std::vector<CustomPattern> custom;
  custom.reserve(config.patterns.size());
  for (std::size_t i = 0; i < config.patterns.size(); ++i) {
    const PiiPattern& pattern = config.patterns[i];
    const std::string where = "patterns[" + std::to_string(i) + "] (" + pattern.name + "): ";
    if (pattern.name.empty()) return Error{"config_invalid", where + "name must not be empty"};
    for (std::size_t j = 0; j < i; ++j) {
      if (config.patterns[j].name == pattern.name) {
        return Error{"config_invalid",
                     where + "duplicate name (also patterns[" + std::to_string(j) + "])"};
      }
    }
    auto regex = std::make_shared<const RE2>(pattern.regex, options);
    if (!regex->ok()) return Error{"config_invalid", where + regex->error()};
    if (RE2::FullMatch("", *regex)) {
      return Error{"config_invalid", where + "regex matches the empty string"};
    }
    custom.push_back({"custom:" + pattern.name, std::move(regex)});
  }
  return PiiDetector(config.enabled, std::move(email), std::move(custom));
}

template <typename OnMatch>
void PiiDetector::for_each_match(std::string_view text, OnMatch&& on_match) const {
  if (!enabled_) return;
  if (may_hold_builtin_item(text)) {
    const bool go_on = for_each_number(text, [&](const NumberItem& item) {
      return on_match(item.kind, item.begin, item.end - item.begin);
    });
    if (!go_on) return;
    const bool has_at = text.find('@') != std::string_view::npos ||
                        text.find(kFullWidthAt) != std::string_view::npos ||
                        text.find(kSmallAt) != std::string_view::npos;
    if (has_at && !for_each_regex_match(*email_, kEmailKind, text, on_match)) {
      return;
    }
  }
  for (const CustomPattern& pattern : custom_) {
    if (!for_each_regex_match(*pattern.regex, pattern.kind, text, on_match)) return;
  }
}

std::vector<PiiMatch> PiiDetector::find(std::string_view text) const {
  std::vector<PiiMatch> matches;
  for_each_match(text, [&](std::string_view kind, std::size_t offset, std::size_t length) {
    matches.push_back({std::string(kind), offset, length});
    return true;
  });
  // Numbers, emails and each custom pattern come in order of offset, but not across kinds.
  std::stable_sort(matches.begin(), matches.end(), [](const PiiMatch& a, const PiiMatch& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.length > b.length;
  });
  std::size_t kept = 0;
  std::size_t covered_until = 0;
  for (std::size_t i = 0; i < matches.size(); ++i) {
    if (matches[i].offset < covered_until) continue;
    covered_until = matches[i].offset + matches[i].length;
    if (kept != i) matches[kept] = std::move(matches[i]);
    ++kept;
  }
  matches.resize(kept);
  return matches;
}

bool PiiDetector::contains(std::string_view text) const {
  bool found = false;
  for_each_match(text, [&](std::string_view, std::size_t, std::size_t) {
    found = true;
    return false;
  });
  return found;
}

std::string PiiDetector::redact(std::string_view text) const {
  std::string redacted;
  redacted.reserve(text.size());
  std::size_t pos = 0;
  for (const PiiMatch& match : find(text)) {
    redacted.append(text.substr(pos, match.offset - pos));
    redacted.append("[").append(match.kind).append("]");
    pos = match.offset + match.length;
  }
  redacted.append(text.substr(pos));
  return redacted;
}

}  // namespace hengshi::router
