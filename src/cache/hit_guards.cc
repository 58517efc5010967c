#include "cache/hit_guards.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <cstdint>
#include <set>

namespace hengshi::cache {
namespace {

// Compounds that contain a negation or direction character without meaning one; blanked out
// before the CJK scan.
constexpr std::string_view kCjkExceptions[] = {
    "非常", "无论", "未来", "未必", "别人", "别的", "别处", "区别", "特别", "分别", "不仅",
    "不但", "不少", "不错", "无线", "关于", "关系", "关心", "关注", "相关", "有关", "机关", "海关",
    "开心", "开发", "开票", "公开", "离开", "开会", "开车", "无人机", "是否", "能否",
    "可否", "否则", "并且", "莫非", "非得"};

// Words first, then single characters (免: free of — 免费 / 收费, 免违约金 / 没有违约金).
constexpr std::string_view kCjkNegationWords[] = {"取消", "撤销"};
constexpr std::string_view kCjkNegationChars[] = {"不", "没", "别", "无", "非", "未", "勿", "莫", "否", "甭", "免"};

// The UTF-8 character before / at `at` in `text` ("" at the ends).
std::string_view character_before(std::string_view text, std::size_t at) {
  if (at == 0) return {};
  std::size_t start = at - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return text.substr(start, at - start);
}
std::string_view character_at(std::string_view text, std::size_t at) {
  if (at >= text.size()) return {};
  std::size_t end = at + 1;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  return text.substr(at, end - at);
}

bool ends_a_clause(std::string_view character) {
  return character.empty() || character == " " || character == "?" || character == "？" || character == "," ||
         character == "，" || character == "。" || character == "!" || character == "！" || character == "呢" ||
         character == "啊" || character == "呀";
}

// Whether the 不 / 没 at `at` (of byte length `size`) asks rather than denies: the A-not-A
// question (能不能, 是不是, 有没有, 可不可以) or a clause-final particle (可以提前还款不?).
bool asks_rather_than_denies(std::string_view text, std::size_t at, std::size_t size) {
  const std::string_view before = character_before(text, at);
  const std::string_view after = character_at(text, at + size);
  if (!before.empty() && before == after && before != " ") return true;
  return (before.size() > 1 || (!before.empty() && before != " ")) && ends_a_clause(after);
}

constexpr std::string_view kLatinNegations[] = {
    "not",    "no",      "never",   "none",    "nobody",   "nothing", "without", "cannot", "cant",
    "dont",   "doesnt",  "didnt",   "isnt",    "arent",    "wasnt",   "werent",  "wont",   "wouldnt",
    "shouldnt", "couldnt", "havent", "hasnt",  "hadnt",    "neither", "nor",     "nowhere", "neednt",
    "mustnt", "aint",    "darent",  "shant",   "mightnt",  "noone"};

struct DirectionPair {
  std::vector<std::string_view> side0;
  std::vector<std::string_view> side1;
};

const std::vector<DirectionPair>& cjk_directions() {
  static const std::vector<DirectionPair> pairs = {
      {{"开通"}, {"关闭", "注销"}},
      {{"打开"}, {"关闭", "关上", "关掉"}},
      {{"开启"}, {"关闭"}},
      {{"启用"}, {"停用", "禁用"}},
      {{"绑定"}, {"解绑", "解除绑定"}},
      {{"订阅"}, {"退订"}},
      {{"升级"}, {"降级"}},
      {{"上调"}, {"下调"}},
      {{"增加"}, {"减少"}},
      {{"提高"}, {"降低"}},
      {{"加入"}, {"退出"}},
      {{"登录"}, {"登出", "退出登录"}},
      {{"充值"}, {"提现"}},
      {{"买入", "购买"}, {"卖出", "出售"}},
      {{"上传"}, {"下载"}},
      {{"显示"}, {"隐藏"}},
      {{"锁定"}, {"解锁"}},
      {{"冻结"}, {"解冻"}},
      {{"存款", "存钱"}, {"取款", "取钱"}},
      {{"收入"}, {"支出"}},
      {{"进口"}, {"出口"}},
      {{"开户"}, {"销户"}},
      {{"开"}, {"关"}},  // last: single characters, after the words that contain them
  };
  return pairs;
}

const std::vector<DirectionPair>& latin_directions() {
  static const std::vector<DirectionPair> pairs = {
      {{"on"}, {"off"}},
      {{"enable", "enabled", "enabling", "enables"}, {"disable", "disabled", "disabling", "disables"}},
      {{"open", "opened", "opening", "opens"}, {"close", "closed", "closing", "closes"}},
      {{"start", "started", "starting", "starts"}, {"stop", "stopped", "stopping", "stops"}},
      {{"add", "added", "adding", "adds"}, {"remove", "removed", "removing", "removes", "delete", "deleted"}},
      {{"increase", "increased", "increasing", "raise", "higher"}, {"decrease", "decreased", "decreasing", "lower", "reduce"}},
      {{"lock", "locked", "locking"}, {"unlock", "unlocked", "unlocking"}},
      {{"subscribe", "subscribed"}, {"unsubscribe", "unsubscribed"}},
      {{"activate", "activated"}, {"deactivate", "deactivated"}},
      {{"upgrade", "upgraded"}, {"downgrade", "downgraded"}},
      {{"login", "signin"}, {"logout", "signout"}},
      {{"connect", "connected"}, {"disconnect", "disconnected"}},
      {{"show", "shown"}, {"hide", "hidden"}},
      {{"allow", "allowed"}, {"block", "blocked", "deny", "denied"}},
      {{"buy", "bought", "purchase"}, {"sell", "sold"}},
      {{"upload", "uploaded"}, {"download", "downloaded"}},
      {{"import", "imported"}, {"export", "exported"}},
      {{"deposit", "deposited"}, {"withdraw", "withdrawal", "withdrawn"}},
      {{"before"}, {"after"}},
      {{"include", "including"}, {"exclude", "excluding"}},
  };
  return pairs;
}

// The first pair ids of the Latin pairs, after the CJK ones.
int latin_pair_id(std::size_t index) { return static_cast<int>(cjk_directions().size() + index); }

bool is_ascii_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Latin words, lower-cased, apostrophes (' and ’) dropped so "don't" reads "dont".
std::vector<std::string> latin_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (is_ascii_alnum(c)) {
      word += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      ++i;
    } else if (c == '\'') {
      ++i;  // inside a word: skipped
    } else if (text.substr(i, 3) == "\xE2\x80\x99") {  // ’
      i += 3;
    } else {
      flush();
      ++i;
    }
  }
  flush();
  return words;
}

// The text with every occurrence of `word` replaced by spaces of the same byte length.
void blank_out(std::string& text, std::string_view word) {
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) {
    std::fill(text.begin() + static_cast<std::ptrdiff_t>(at),
              text.begin() + static_cast<std::ptrdiff_t>(at + word.size()), ' ');
  }
}

void blank_out_at(std::string& text, std::size_t at, std::size_t size) {
  std::fill(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(at + size), ' ');
}

std::size_t count_and_blank(std::string& text, std::string_view word) {
  std::size_t count = 0;
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) {
    ++count;
    std::fill(text.begin() + static_cast<std::ptrdiff_t>(at),
              text.begin() + static_cast<std::ptrdiff_t>(at + word.size()), ' ');
  }
  return count;
}

// ---- numbers ----

// A Chinese numeral character's value: digits 0..9, or a multiplier (10, 100, ...); -1 otherwise.
struct CjkDigit {
  std::string_view text;
  std::int64_t value;
  bool multiplier;
};
constexpr CjkDigit kCjkDigits[] = {{"零", 0, false},   {"〇", 0, false},   {"一", 1, false},
                                                  {"二", 2, false},   {"两", 2, false},   {"三", 3, false},
                                                  {"四", 4, false},   {"五", 5, false},   {"六", 6, false},
                                                  {"七", 7, false},   {"八", 8, false},   {"九", 9, false},
                                                  {"十", 10, true},   {"百", 100, true},  {"千", 1000, true},
                                                  {"万", 10000, true}, {"亿", 100000000, true}};

const CjkDigit* cjk_digit_at(std::string_view text, std::size_t at) {
  for (const auto& digit : kCjkDigits) {
    if (text.substr(at, digit.text.size()) == digit.text) return &digit;
  }
  return nullptr;
}

// Measure words and units after which a run of Chinese numerals is a quantity.
constexpr std::string_view kMeasureWords[] = {
    "个", "元", "块", "角", "分", "天", "日", "月", "年", "号", "次", "件", "台", "位", "岁", "斤", "里",
    "米", "克", "吨", "倍", "周", "小时", "点", "层", "楼", "张", "份", "瓶", "袋", "盒", "票", "人", "间",
    "单", "笔", "期", "%"};

bool measure_word_at(std::string_view text, std::size_t at) {
  return std::any_of(std::begin(kMeasureWords), std::end(kMeasureWords),
                     [&](std::string_view word) { return text.substr(at, word.size()) == word; });
}

// Caller text can stack multipliers (亿亿亿…): the arithmetic saturates instead of overflowing,
// and two saturated numbers compare equal, which is harmless for a guard.
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<std::int64_t>::max() : out;
}

std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<std::int64_t>::max() : out;
}

// The value of a run of Chinese numerals (十五 = 15, 两千零八 = 2008, 三万五千 = 35000).
std::int64_t cjk_value(const std::vector<const CjkDigit*>& run) {
  std::int64_t total = 0;
  std::int64_t section = 0;  // the part below the last 万 / 亿
  std::int64_t digit = -1;   // the digit waiting for its multiplier; -1 = none
  for (const CjkDigit* d : run) {
    if (!d->multiplier) {
      digit = d->value;
    } else if (d->value < 10000) {
      section = saturating_add(section, saturating_mul(digit < 0 ? 1 : digit, d->value));  // 十五: an implicit 一
      digit = -1;
    } else {
      total = saturating_mul(saturating_add(saturating_add(total, section), std::max<std::int64_t>(digit, 0)),
                             d->value);
      section = 0;
      digit = -1;
    }
  }
  return saturating_add(saturating_add(total, section), std::max<std::int64_t>(digit, 0));
}

void extract_numbers(std::string_view text, std::vector<std::string>& out) {
  for (std::size_t i = 0; i < text.size();) {
    if (is_digit(text[i])) {
      // Digits with separators between them: 2024-05-01, 12:30, 3.5, 1,000 (commas dropped).
      std::string number;
      std::size_t j = i;
      while (j < text.size()) {
        if (is_digit(text[j])) {
          number += text[j++];
        } else if ((text[j] == '.' || text[j] == ',' || text[j] == '-' || text[j] == ':' || text[j] == '/') &&
                   j + 1 < text.size() && is_digit(text[j + 1]) && j > i) {
          if (text[j] != ',') number += text[j];
          ++j;
        } else {
          break;
        }
      }
      out.push_back(std::move(number));
      i = j;
      continue;
    }
    if (cjk_digit_at(text, i) != nullptr) {
      std::vector<const CjkDigit*> run;
      std::size_t j = i;
      while (j < text.size()) {
        const CjkDigit* d = cjk_digit_at(text, j);
        if (d == nullptr) break;
        run.push_back(d);
        j += d->text.size();
      }
      const bool ordinal = i >= 3 && text.substr(i - 3, 3) == "第";
      if (ordinal || measure_word_at(text, j)) out.push_back(std::to_string(cjk_value(run)));
      i = j;
      continue;
    }
    ++i;
  }
}

void extract_domains(std::string_view text, std::vector<std::string>& out) {
  for (std::size_t at = text.find('@'); at != std::string_view::npos; at = text.find('@', at + 1)) {
    std::string domain;
    for (std::size_t j = at + 1; j < text.size(); ++j) {
      const char c = text[j];
      if (is_ascii_alnum(c) || c == '-' || c == '.') {
        domain += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      } else {
        break;
      }
    }
    while (!domain.empty() && domain.back() == '.') domain.pop_back();
    if (!domain.empty()) out.push_back(std::move(domain));
  }
  std::sort(out.begin(), out.end());
}

}  // namespace

const char* to_string(Guard guard) {
  switch (guard) {
    case Guard::polarity: return "polarity";
    case Guard::numbers: return "numbers";
    case Guard::intent: return "intent";
  }
  return "?";
}

GuardFeatures guard_features(std::string_view normalized) {
  GuardFeatures features;
  std::set<std::pair<int, int>> directions;

  for (const std::string& word : latin_words(normalized)) {
    const bool negation = std::find(std::begin(kLatinNegations), std::end(kLatinNegations), word) != std::end(kLatinNegations);
    if (negation) ++features.negations;
    const auto& pairs = latin_directions();
    for (std::size_t p = 0; p < pairs.size(); ++p) {
      for (int side = 0; side < 2; ++side) {
        const auto& words = side == 0 ? pairs[p].side0 : pairs[p].side1;
        if (std::find(words.begin(), words.end(), word) != words.end()) directions.insert({latin_pair_id(p), side});
      }
    }
  }

  std::string cjk(normalized);
  for (std::string_view exception : kCjkExceptions) blank_out(cjk, exception);
  // 不过 is "but" at a clause's start and "not pass" after a verb (申请不过).
  for (std::size_t at = cjk.find("不过"); at != std::string::npos; at = cjk.find("不过", at + 1)) {
    if (ends_a_clause(character_before(cjk, at))) blank_out_at(cjk, at, std::string_view("不过").size());
  }
  for (std::string_view negation : kCjkNegationWords) {
    features.negations += static_cast<int>(count_and_blank(cjk, negation));
  }
  for (std::string_view negation : kCjkNegationChars) {
    for (std::size_t at = cjk.find(negation); at != std::string::npos; at = cjk.find(negation, at + negation.size())) {
      const bool question = (negation == "不" || negation == "没") && asks_rather_than_denies(cjk, at, negation.size());
      if (!question) ++features.negations;
    }
    blank_out(cjk, negation);
  }
  // Longer direction words first, so 开通 is not also read as 开.
  const auto& pairs = cjk_directions();
  std::vector<std::pair<std::string_view, std::pair<int, int>>> words;
  for (std::size_t p = 0; p < pairs.size(); ++p) {
    for (std::string_view w : pairs[p].side0) words.push_back({w, {static_cast<int>(p), 0}});
    for (std::string_view w : pairs[p].side1) words.push_back({w, {static_cast<int>(p), 1}});
  }
  std::stable_sort(words.begin(), words.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [word, marker] : words) {
    // A word in several pairs (关闭) marks each of them.
    if (cjk.find(word) == std::string::npos) continue;
    for (const auto& [other, other_marker] : words) {
      if (other == word) directions.insert(other_marker);
    }
    blank_out(cjk, word);
  }
  features.directions.assign(directions.begin(), directions.end());
  extract_numbers(normalized, features.numbers);
  extract_domains(normalized, features.domains);
  return features;
}

std::optional<Guard> guard_rejects(const GuardFeatures& query, const GuardFeatures& cached) {
  if ((query.negations % 2) != (cached.negations % 2)) return Guard::polarity;
  // A direction pair on opposite sides (and not on a shared one) flips the question.
  for (const auto& [pair, side] : query.directions) {
    const bool same = std::find(cached.directions.begin(), cached.directions.end(), std::pair{pair, side}) !=
                      cached.directions.end();
    const bool opposite = std::find(cached.directions.begin(), cached.directions.end(), std::pair{pair, 1 - side}) !=
                          cached.directions.end();
    if (opposite && !same) return Guard::polarity;
  }
  if (query.numbers != cached.numbers || query.domains != cached.domains) return Guard::numbers;
  return std::nullopt;
}

}  // namespace hengshi::cache
