// The answer sources of the chain (answer_source.h), one per kind of answerer:
//   EdgeIntentSource  the intent engine's canned answer (already predicted: microseconds);
//                     with a judge pool, served only when cloud-small confirms it (middle band)
//   EdgeLlmSource     the embedded LLM's serving version (its live slot) on its worker pool;
//                     degraded at L1
//   CloudSource       one cloud pool (member choice, breakers and bulkhead live in the pool)
//   CannedSource      a configured reply: human hand-off, PII safe reply, last resort
// Ownership: each borrows its engine / pool, which must outlive it. Thread-safety: as AnswerSource.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chain/answer_source.h"
#include "cloud/cloud_pool.h"
#include "edge/intent_engine.h"
#include "edge/llm_slot.h"

namespace hengshi::chain {

// What `usage` cost on `upstream` of `pool`, at the member's configured prices.
double cost_of(const cloud::CloudPool& pool, const std::string& upstream, std::int64_t prompt_tokens,
               std::int64_t completion_tokens);

class EdgeIntentSource : public AnswerSource {
 public:
  // `judge`: the pool asked to confirm the answer (null: served as is).
  EdgeIntentSource(std::string model_id, cloud::CloudPool* judge) : model_id_(std::move(model_id)), judge_(judge) {}
  awaitable<Result<Answer, AttemptError>> answer(const SourceRequest& request) override;

 private:
  std::string model_id_;
  cloud::CloudPool* judge_;
};

class EdgeLlmSource : public AnswerSource {
 public:
  explicit EdgeLlmSource(const edge::LlmSlot& slot) : slot_(slot) {}
  awaitable<Result<Answer, AttemptError>> answer(const SourceRequest& request) override;
  bool streams() const override { return true; }
  awaitable<Result<Answer, AttemptError>> stream(const SourceRequest& request, PieceSink sink) override;

 private:
  awaitable<Result<Answer, AttemptError>> generate(const SourceRequest& request, edge::PieceSink sink);
  const edge::LlmSlot& slot_;
};

class CloudSource : public AnswerSource {
 public:
  explicit CloudSource(cloud::CloudPool& pool) : pool_(pool) {}
  awaitable<Result<Answer, AttemptError>> answer(const SourceRequest& request) override;
  awaitable<std::optional<AttemptError>> answer_into(const SourceRequest& request, Answer& out) override;
  bool streams() const override { return true; }
  awaitable<Result<Answer, AttemptError>> stream(const SourceRequest& request, PieceSink sink) override;

 private:
  // Fills in what a successful call answered, priced at its member's rates.
  void answered(Answer& answer, const std::string& model, const std::string& upstream, const cloud::Usage& usage,
                std::chrono::microseconds latency) const;
  cloud::CloudPool& pool_;
};

class CannedSource : public AnswerSource {
 public:
  // Views: the server builds three per request from the policy snapshot and the config, which
  // outlive it, and most requests never ask them (copies were six allocations per request).
  CannedSource(std::string_view model, std::string_view text) : model_(model), text_(text) {}
  awaitable<Result<Answer, AttemptError>> answer(const SourceRequest& request) override;

 private:
  std::string_view model_;
  std::string_view text_;
};

// The text of an OpenAI chat.completion body (choices[0].message.content), "" when absent.
inline const std::string& reply_text(const cloud::ReplyBody& body) { return body.content; }

// The judge's verdict: its answer starts with "yes" (any case) or 是, past quotes and spaces.
bool says_yes(std::string_view text);

// A cheap yes/no check for a judge pool: a few output tokens, temperature 0. `instruction` is the
// system prompt; the user turn shows "<label>: <answer>" and asks whether it answers `question`.
nlohmann::json yes_no_check(std::string_view instruction, std::string_view label, std::string_view answer,
                            std::string_view question);

}  // namespace hengshi::chain
