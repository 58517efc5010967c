#include "router/complexity.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/byte_word.h"

namespace hengshi::router {
namespace {

enum class CueKind { kReasoning, kConstraint, kCode, kMath };

struct CuePattern {
  CueKind kind;
  std::string_view regex;
};

// One entry per concept, Chinese and English together, so a feature counts distinct concepts:
// "why … 为什么 … 原因" is one reasoning cue. RE2's \b is ASCII-only, so a CJK neighbour counts
// as a boundary ("请explain一下" has the cue). Code is case-sensitive, like code.
constexpr std::array<CuePattern, 20> kCuePatterns = {{
    {CueKind::kReasoning, R"re((?i)\bwhy\b|为什么|为何|原因)re"},
    {CueKind::kReasoning, R"re((?i)\bhow\b|如何|怎么|怎样)re"},
    {CueKind::kReasoning,
     R"re((?i)\b(?:compar(?:e|es|ed|ing|ison|isons)|contrast|versus|vs)\b|比较|对比)re"},
    {CueKind::kReasoning, R"re((?i)\bdifferen(?:ce|ces|t|tiate)\b|区别|差异|不同)re"},
    {CueKind::kReasoning, R"re((?i)\b(?:explain(?:s|ed|ing)?|explanation)\b|解释|原理)re"},
    {CueKind::kReasoning,
     R"re((?i)\b(?:analy[sz](?:e|es|ed|ing|is)|evaluat(?:e|ion)|assess(?:ment)?|critique)\b)re"
     R"re(|分析|评估|评价)re"},
    {CueKind::kReasoning, R"re((?i)\bstep[\s-]+by[\s-]+step\b|步骤|一步一步|一步步|逐步)re"},
    {CueKind::kReasoning,
     R"re((?i)\b(?:prove|proof|derive|derivation|justify)\b|证明|推导|论证)re"},
    {CueKind::kReasoning,
     R"re((?i)\b(?:pros\s+and\s+cons|trade[\s-]?offs?|advantages\s+and\s+disadvantages)\b)re"
     R"re(|优缺点|优劣|利弊|权衡)re"},
    {CueKind::kReasoning,
     R"re((?i)\b(?:in\s+depth|root\s+cause|implications?|reasoning)\b|深入|根本原因)re"},

    {CueKind::kConstraint, R"re((?i)\bmust\b|必须|务必|一定要)re"},
    {CueKind::kConstraint,
     R"re((?i)\b(?:at\s+most|no\s+more\s+than|no\s+longer\s+than|fewer\s+than|word\s+limit)\b)re"
     R"re(|\b\d+\s+(?:words|sentences|paragraphs|lines|bullets)\b)re"
     R"re(|不超过|不多于|最多|以内|控制在|字数|\d+\s*字)re"},
    {CueKind::kConstraint, R"re((?i)\bat\s+least\b|不少于|至少)re"},
    {CueKind::kConstraint, R"re((?i)\bexactly\b|严格|精确)re"},
    {CueKind::kConstraint, R"re((?i)\b(?:json|yaml|csv|xml|markdown|format(?:s|ted)?)\b|格式)re"},
    {CueKind::kConstraint, R"re((?i)\btables?\b|表格)re"},
    {CueKind::kConstraint,
     R"re((?i)\b(?:bullet\s+points?|bulleted|numbered\s+list)\b|列表|分点|分条)re"},
    {CueKind::kConstraint,
     R"re((?i)\bonly\s+(?:output|return|reply|answer|respond)\b|只输出|只回答|仅输出)re"},

    {CueKind::kCode,
     R"re(```|#include\s*[<"]|\bdef\s+\w+\s*\(|\bfunction\s*\w*\s*\([^)]*\)\s*\{|\w\s*=>|\w::\w)re"
     R"re(|\bconsole\.\w+\(|\bSystem\.out\.|\bprintf\s*\(|\)\s*\{|;[ \t]*(?:\r?\n|$))re"
     R"re(|\b(?:SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM|CREATE\s+TABLE)\s+[\w*])re"
     R"re(|Traceback \(most recent call last\)|</?[a-z][a-z0-9]*(?:\s[^<>]*)?>)re"
     R"re(|\b(?:import|package)\s+[\w.]+;|\bfrom\s+[\w.]+\s+import\s+\w|\breturn\s+[^\n]*;)re"},
    // "-" is left out of the digit operators: dates and phone numbers use it.
    {CueKind::kMath,
     R"re(\d\s*[+*/^×÷]\s*\(?\d|[A-Za-z0-9)\]]\s*(?:=|≠|≤|≥|<=|>=)\s*[A-Za-z0-9(\[-])re"
     R"re(|\w\s*\^\s*\w|[∫∑∏√π∞≈≠≤≥∂]|(?i:\b(?:sin|cos|tan|log|ln|exp|lim)\s*\())re"
     R"re(|(?i:\b(?:equations?|integrals?|derivatives?|matri(?:x|ces)|polynomials?|theorem)\b))re"
     R"re(|方程|积分|导数|微分|求导|矩阵|概率|多项式|定理)re"},
}};

// The regexes alone, in the same order: what complexity_cue_patterns() hands out.
constexpr std::array<std::string_view, kCuePatterns.size()> kCueRegexes = [] {
  std::array<std::string_view, kCuePatterns.size()> regexes{};
  for (std::size_t i = 0; i < kCuePatterns.size(); ++i) regexes[i] = kCuePatterns[i].regex;
  return regexes;
}();

// All cue patterns as one RE2::Set: a single pass over the text finds every concept present.
class CueMatcher {
 public:
  CueMatcher() : set_(RE2::Options(), RE2::UNANCHORED) {
    for (std::string_view regex : kCueRegexes) {
      // A built-in pattern that fails to parse is logged by RE2 and replaced by one that never
      // matches, so set indices stay pattern indices; tests catch it.
      if (set_.Add(regex, nullptr) < 0) set_.Add(R"re([^\x00-\x{10FFFF}])re", nullptr);
    }
    set_.Compile();
  }

  // Adds the cues found in `text` to `features`.
  void scan(std::string_view text, ComplexityFeatures& features) const {
    // Asking which patterns matched allocates RE2's match set; most questions match none, and
    // asking whether any did allocates nothing.
    if (!set_.Match(text, nullptr)) return;
    std::vector<int> hits;
    set_.Match(text, &hits);
    add_complexity_cues(hits, features);
  }

 private:
  RE2::Set set_;
};

// Compiled once, on first use; matching a compiled RE2::Set is thread-safe.
const CueMatcher& cue_matcher() {
  static const CueMatcher matcher;
  return matcher;
}

struct CodePoint {
  char32_t value = 0;
  std::size_t length = 1;  // bytes
};

// Lenient: a byte that does not start a complete sequence is one U+FFFD; overlongs pass.
CodePoint decode_utf8(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {lead, 1};
  const std::size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
  if (length == 0 || lead > 0xF4 || pos + length > text.size()) return {0xFFFD, 1};
  char32_t value = lead & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[pos + i]);
    if ((next & 0xC0) != 0x80) return {0xFFFD, 1};
    value = (value << 6) | (next & 0x3F);
  }
  return {value, length};
}

bool is_cjk(char32_t c) {
  if (c < 0x3000) return false;           // the common case: ASCII and other alphabets
  return (c <= 0x30FF) ||                 // CJK punctuation, kana
         (c >= 0x3400 && c <= 0x4DBF) ||  // Han extension A
         (c >= 0x4E00 && c <= 0x9FFF) ||  // Han
         (c >= 0xAC00 && c <= 0xD7AF) ||  // Hangul
         (c >= 0xF900 && c <= 0xFAFF) ||  // Han compatibility
         (c >= 0xFF00 && c <= 0xFFEF) ||  // full-width forms
         (c >= 0x20000 && c <= 0x2FFFF);  // Han extensions B..
}

// approx_token_count()'s arithmetic, shared with complexity_features()'s single pass.
struct TokenTally {
  int cjk_chars = 0;
  std::size_t other_bytes = 0;

  void add(const CodePoint& c) {
    if (is_cjk(c.value)) {
      ++cjk_chars;
    } else {
      other_bytes += c.length;
    }
  }
  int tokens() const { return cjk_chars + static_cast<int>((other_bytes + 3) / 4); }
};

bool is_space(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == 0xA0 ||
         c == 0x3000;
}

bool is_question_mark(char32_t c) { return c == '?' || c == 0xFF1F; }

// "." ends a sentence only before white space or the end ("3.14", "a.com" do not).
bool ends_sentence(char32_t c, std::string_view text, std::size_t next) {
  switch (c) {
    case '!':
    case '?':
    case '\n':
    case 0x3002:  // 。
    case 0xFF01:  // ！
    case 0xFF1F:  // ？
    case 0x2026:  // …
      return true;
    case '.':
      return next >= text.size() || is_space(static_cast<unsigned char>(text[next]));
    default:
      return false;
  }
}

// ASCII bytes that are neither white space nor a sentence end nor a question mark: each is one
// non-CJK character that continues a sentence, which is all the loop needs to know of it.
constexpr std::array<bool, 256> kPlainAscii = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x00; c < 0x80; ++c) plain[c] = true;
  for (char c : {' ', '\t', '\n', '\r', '\f', '\v', '.', '!', '?'}) plain[static_cast<unsigned char>(c)] = false;
  return plain;
}();

// The points table. Each feature earns one point per threshold it reaches, and the total one
// score step per score threshold, so the score is monotone in every feature. The weights are
// checked on data by bench/router (the edge model's error rate must rise with the score): tune
// them there, not by feel.
constexpr std::array<int, 4> kTokenThresholds = {24, 64, 160, 400};
constexpr std::array<int, 4> kReasoningThresholds = {2, 3, 4, 5};  // one cue ("how do I") is free
constexpr std::array<int, 2> kConstraintThresholds = {1, 3};
constexpr std::array<int, 2> kQuestionThresholds = {2, 4};  // multi-part requests
constexpr std::array<int, 1> kSentenceThresholds = {5};
constexpr std::array<int, 2> kTurnThresholds = {6, 16};
constexpr int kCodePoints = 2;
constexpr int kMathPoints = 1;
constexpr std::array<int, 4> kScoreThresholds = {1, 3, 4, 6};  // least points for scores 2..5

template <std::size_t N>
int thresholds_reached(int value, const std::array<int, N>& thresholds) {
  int reached = 0;
  for (int threshold : thresholds) reached += value >= threshold ? 1 : 0;
  return reached;
}

}  // namespace

int approx_token_count(std::string_view utf8_text) {
  TokenTally tally;
  for (std::size_t pos = 0; pos < utf8_text.size();) {
    // ASCII is never CJK and one byte a character: eight at a time while no byte is above 0x7F.
    while (pos + 8 <= utf8_text.size() && !has_high_byte(load_word(utf8_text.data() + pos))) {
      tally.other_bytes += 8;
      pos += 8;
    }
    if (pos >= utf8_text.size()) break;
    if (static_cast<unsigned char>(utf8_text[pos]) < 0x80) {  // ASCII is never CJK: no decode
      ++tally.other_bytes;
      ++pos;
      continue;
    }
    const CodePoint c = decode_utf8(utf8_text, pos);
    tally.add(c);
    pos += c.length;
  }
  return tally.tokens();
}

ComplexityFeatures complexity_features(std::string_view text, int conversation_turns) {
  ComplexityFeatures features = complexity_features_without_cues(text, conversation_turns);
  cue_matcher().scan(text, features);
  return features;
}

std::span<const std::string_view> complexity_cue_patterns() { return kCueRegexes; }

void add_complexity_cues(std::span<const int> matched_cue_patterns, ComplexityFeatures& features) {
  for (int hit : matched_cue_patterns) {
    if (hit < 0 || static_cast<std::size_t>(hit) >= kCuePatterns.size()) continue;
    switch (kCuePatterns[static_cast<std::size_t>(hit)].kind) {
      case CueKind::kReasoning:
        ++features.reasoning_cues;
        break;
      case CueKind::kConstraint:
        ++features.constraint_cues;
        break;
      case CueKind::kCode:
        features.has_code = true;
        break;
      case CueKind::kMath:
        features.has_math = true;
        break;
    }
  }
}

ComplexityFeatures complexity_features_without_cues(std::string_view text, int conversation_turns) {
  ComplexityFeatures features;
  TokenTally tally;
  bool in_sentence = false;
  bool after_question_mark = false;
  for (std::size_t pos = 0; pos < text.size();) {
    // Inside a sentence, eight ASCII bytes with no sentence end and no question mark change
    // nothing but the counts (a space keeps the sentence open; any character ends a run of
    // question marks): prose is read a word at a time, not a byte.
    if (in_sentence) {
      while (pos + 8 <= text.size()) {
        const std::uint64_t word = load_word(text.data() + pos);
        if (has_high_byte(word) || has_byte(word, '.') || has_byte(word, '!') || has_byte(word, '?') ||
            has_byte(word, '\n')) {
          break;
        }
        pos += 8;
        features.chars += 8;
        tally.other_bytes += 8;
        after_question_mark = false;
      }
      if (pos >= text.size()) break;
    }
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (kPlainAscii[lead]) {  // most of a text: what the general steps below conclude for it
      ++pos;
      ++features.chars;
      ++tally.other_bytes;
      after_question_mark = false;
      in_sentence = true;
      continue;
    }
    const CodePoint c = lead < 0x80 ? CodePoint{lead, 1} : decode_utf8(text, pos);  // no call for ASCII
    pos += c.length;
    ++features.chars;
    tally.add(c);
    if (is_question_mark(c.value) && !after_question_mark) ++features.questions;
    after_question_mark = is_question_mark(c.value);
    if (ends_sentence(c.value, text, pos)) {
      if (in_sentence) ++features.sentences;
      in_sentence = false;
    } else if (!is_space(c.value)) {
      in_sentence = true;
    }
  }
  if (in_sentence) ++features.sentences;

  features.approx_tokens = tally.tokens();
  features.turns = conversation_turns;
  return features;
}

int complexity_score(const ComplexityFeatures& features) {
  const int points = thresholds_reached(features.approx_tokens, kTokenThresholds) +
                     thresholds_reached(features.reasoning_cues, kReasoningThresholds) +
                     thresholds_reached(features.constraint_cues, kConstraintThresholds) +
                     thresholds_reached(features.questions, kQuestionThresholds) +
                     thresholds_reached(features.sentences, kSentenceThresholds) +
                     thresholds_reached(features.turns, kTurnThresholds) +
                     (features.has_code ? kCodePoints : 0) + (features.has_math ? kMathPoints : 0);
  return 1 + thresholds_reached(points, kScoreThresholds);
}

int approx_prompt_tokens(const std::vector<ChatMessage>& messages) {
  int tokens = 0;
  for (const auto& message : messages) tokens += approx_token_count(message.text) + 4;
  return tokens;
}

}  // namespace hengshi::router
