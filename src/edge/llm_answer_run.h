// Greedy answers of the edge LLM to a set of rows, scored against the expected answers: what
// `hengshi finetune` reports before and after, and what `hengshi edge gate` compares.
// Internal to edge/ (includes the engine): llm_*.cc only.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "edge/finetune_data.h"
#include "edge/llm_engine.h"

namespace hengshi::edge {

struct AnswerScores {
  int rows = 0;
  double mean_f1 = 0;  // char_f1 of greedy answers against the expected ones
  double exact = 0;    // share answered exactly (whitespace-trimmed)
};

struct AnswerRun {
  AnswerScores scores;
  std::vector<std::string> answers;  // one per row; "" where generation failed
  double tokens_per_second = 0;      // completion tokens over generation time (prompts included)
  int failed = 0;                    // rows whose generation returned an error
  Error first_error;                 // the first of those errors
};

// Greedy answers added one row at a time: answer_rows() runs one engine over a set; the gate
// interleaves two so both are timed under the same load.
class AnswerTally {
 public:
  // `adapter` "" = the base; `max_tokens` 0 = the engine's default.
  void answer(LlmEngine& engine, const std::string& adapter, const FinetuneRow& row, int max_tokens);
  AnswerRun finish() &&;

 private:
  AnswerRun run_;
  double f1_ = 0;
  int exact_ = 0;
  long tokens_ = 0;
  double seconds_ = 0;
};

AnswerRun answer_rows(LlmEngine& engine, const std::string& adapter,
                      const std::vector<FinetuneRow>& rows, int max_tokens);

}  // namespace hengshi::edge
