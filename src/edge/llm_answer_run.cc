#include "edge/llm_answer_run.h"

#include <chrono>

#include "edge/answer_score.h"

namespace hengshi::edge {

void AnswerTally::answer(LlmEngine& engine, const std::string& adapter, const FinetuneRow& row, int max_tokens) {
  GenerationRequest request;
  request.messages = engine.edge_messages(row.prompt());
  request.max_tokens = max_tokens;
  request.adapter = adapter;
  const auto started = std::chrono::steady_clock::now();
  auto generated = engine.generate_blocking(request);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!generated && run_.failed++ == 0) run_.first_error = generated.error();
  const std::string text = generated ? generated->text : std::string();
  if (generated) tokens_ += generated->completion_tokens;
  f1_ += char_f1(text, row.answer());
  exact_ += same_answer(text, row.answer()) ? 1 : 0;
  run_.answers.push_back(text);
}

AnswerRun AnswerTally::finish() && {
  const auto rows = run_.answers.size();
  run_.scores.rows = static_cast<int>(rows);
  if (rows > 0) {
    run_.scores.mean_f1 = f1_ / double(rows);
    run_.scores.exact = double(exact_) / double(rows);
  }
  run_.tokens_per_second = seconds_ > 0 ? double(tokens_) / seconds_ : 0;
  return std::move(run_);
}

AnswerRun answer_rows(LlmEngine& engine, const std::string& adapter,
                      const std::vector<FinetuneRow>& rows, int max_tokens) {
  AnswerTally tally;
  for (const auto& row : rows) tally.answer(engine, adapter, row, max_tokens);
  return std::move(tally).finish();
}

}  // namespace hengshi::edge
