#include "edge/llm_answer_run.h"

#include <chrono>

#include "edge/answer_score.h"

namespace hengshi::edge {

AnswerRun answer_rows(LlmEngine& engine, const std::string& adapter,
                      const std::vector<FinetuneRow>& rows, int max_tokens) {
  AnswerRun run;
  double f1 = 0;
  int exact = 0;
  long tokens = 0;
  double seconds = 0;
  for (const auto& row : rows) {
    GenerationRequest request;
    request.messages = engine.edge_messages(row.prompt());
    request.max_tokens = max_tokens;
    request.adapter = adapter;
    const auto started = std::chrono::steady_clock::now();
    auto generated = engine.generate_blocking(request);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!generated && run.failed++ == 0) run.first_error = generated.error();
    const std::string text = generated ? generated->text : std::string();
    if (generated) tokens += generated->completion_tokens;
    f1 += char_f1(text, row.answer());
    exact += same_answer(text, row.answer()) ? 1 : 0;
    run.answers.push_back(text);
  }
  run.scores.rows = static_cast<int>(rows.size());
  if (!rows.empty()) {
    run.scores.mean_f1 = f1 / double(rows.size());
    run.scores.exact = double(exact) / double(rows.size());
  }
  run.tokens_per_second = seconds > 0 ? double(tokens) / seconds : 0;
  return run;
}

}  // namespace hengshi::edge
