// The chain's metrics, declared in one place (STYLE.md). Label values are bounded: levels,
// source names and error kinds come from enums and fixed codes.
#pragma once

#include <string>
#include <string_view>

namespace hengshi::chain {

struct ChainMetrics {
  // hengshi_chain_hops_total{level, source, outcome}: one per level walked
  static void count_hop(std::string_view level, std::string_view source, std::string_view outcome);
  // hengshi_chain_attempts_total{source, outcome}: one per attempt (retries included)
  static void count_attempt(std::string_view source, std::string_view outcome);
  // hengshi_chain_retries_total{source}: attempts after the first at the same level
  static void count_retry(std::string_view source);
  // hengshi_chain_answers_total{level, kind}: requests answered, by the level that answered and
  // the kind of answer (model | canned | handoff); level "none", kind "error" without an answer
  static void count_answer(std::string_view level, std::string_view kind);
  // hengshi_chain_stream_failures_total{phase}: before_commit (replaced) | after_commit (error event)
  static void count_stream_failure(std::string_view phase);
};

}  // namespace hengshi::chain
