// How hard a request looks, from its text alone: a score 1..5 that the router reads as "score ≥ 4
// goes to the large cloud model". Cheap by design: one UTF-8 pass and one RE2::Set pass.
//
// Pure functions; safe to call from many threads at once.
#pragma once

#include "core/chat_request.h"

#include <span>
#include <string_view>

namespace hengshi::router {

struct ComplexityFeatures {
  int chars = 0;          // Unicode code points (an invalid UTF-8 byte counts as one)
  int approx_tokens = 0;  // approx_token_count()
  int sentences = 0;      // non-empty pieces ended by . ! ? 。！？… or a line break
  int questions = 0;      // runs of ? or ？ ("??" is one)
  // Distinct concepts present, each in Chinese and English: why/为什么, how/如何, compare/比较,
  // difference/区别, explain/解释, analyze/分析, step by step/步骤, prove/证明, trade-offs/利弊.
  int reasoning_cues = 0;
  // Likewise: must/必须, at most/不超过, at least/至少, exactly, JSON/格式, table/表格, list/列表.
  int constraint_cues = 0;
  bool has_code = false;  // ``` or typical code tokens (#include, def f(, ";" at line end, ...)
  bool has_math = false;  // digits with operators, equations, math symbols or math words
  int turns = 0;          // the conversation_turns passed in

  bool operator==(const ComplexityFeatures&) const = default;
};

// `text`: the request's text to score (usually the last user message), UTF-8.
// `conversation_turns`: messages in the conversation so far, as the caller counts them.
ComplexityFeatures complexity_features(std::string_view text, int conversation_turns);

// The same in two halves, for a caller that runs the cue patterns in an RE2::Set of its own
// beside other patterns (the router's one pass over the last user text, SensitiveSignals):
// every feature but the cues, then the cues from the indices of complexity_cue_patterns() that
// matched. Together they give exactly complexity_features().
ComplexityFeatures complexity_features_without_cues(std::string_view text, int conversation_turns);
void add_complexity_cues(std::span<const int> matched_cue_patterns, ComplexityFeatures& features);
// The cue patterns, in RE2 syntax, in a fixed order (default RE2::Options, unanchored).
std::span<const std::string_view> complexity_cue_patterns();

// 1..5; non-decreasing in every feature.
int complexity_score(const ComplexityFeatures& features);

// Cheap token estimate: a CJK character (Han, kana, Hangul, CJK and full-width punctuation)
// ≈ 1 token; all other text ≈ 4 bytes per token, rounded up.
int approx_token_count(std::string_view utf8_text);

// A conversation's prompt tokens: each message's text plus its role and framing tokens.
int approx_prompt_tokens(const std::vector<ChatMessage>& messages);

}  // namespace hengshi::router
