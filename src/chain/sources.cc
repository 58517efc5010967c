#include "chain/sources.h"

#include <algorithm>
#include <cctype>

#include "router/complexity.h"

namespace hengshi::chain {
namespace {

using nlohmann::json;
using std::chrono::duration_cast;
using std::chrono::microseconds;

microseconds since(Clock::time_point start) { return duration_cast<microseconds>(Clock::now() - start); }

// llama.cpp engine errors as attempt errors.
AttemptError llm_error(const Error& error) {
  AttemptError out;
  out.kind = error.code;
  if (error.code == "edge_llm_busy") {
    out.api = ApiError::unavailable("edge_llm_busy", error.message);
    out.api.status = 429;
    out.api.type = "rate_limit_error";
    out.retry_after_ms = 1000;
    out.error_class = ErrorClass::next_level;  // the cloud may take it: the edge's queue is its own
  } else if (error.code == "prompt_too_long") {
    out.api = ApiError::invalid_request("context_length_exceeded", error.message, "messages");
    out.error_class = ErrorClass::next_level;  // the degraded level cuts the context; the cloud has more
  } else if (error.code == "prompt_empty") {
    out.api = ApiError::invalid_request("prompt_empty", error.message, "messages");
    out.error_class = ErrorClass::terminal;
  } else {
    out.api = error.code == "edge_llm_stopped" ? ApiError::unavailable("edge_llm_stopped", error.message)
                                               : ApiError::internal("edge LLM failed: " + error.message);
    out.error_class = ErrorClass::next_level;
  }
  return out;
}

AttemptError cancelled_error() {
  AttemptError out;
  out.kind = "cancelled";
  out.error_class = ErrorClass::cancelled;
  out.api = ApiError::unavailable("cancelled", "the request was cancelled");
  return out;
}

// L1: only the system prompt (if any) and the last user turn, cut to 70% of the context; no
// summary of earlier turns (the few-shot / history part of the edge prompt).
std::vector<ChatMessage> degraded_messages(const std::vector<ChatMessage>& edge_messages, int context_tokens) {
  std::vector<ChatMessage> out;
  for (const auto& message : edge_messages) {
    if (message.role == "system") {
      out.push_back(message);
      break;
    }
  }
  for (auto it = edge_messages.rbegin(); it != edge_messages.rend(); ++it) {
    if (it->role == "user") {
      ChatMessage last = *it;
      // ~3 bytes per token is conservative for mixed Chinese/English text.
      const std::size_t max_bytes = static_cast<std::size_t>(context_tokens) * 7 / 10 * 3;
      if (last.text.size() > max_bytes) {
        std::size_t cut = last.text.size() - max_bytes;
        while (cut < last.text.size() && (static_cast<unsigned char>(last.text[cut]) & 0xC0) == 0x80) ++cut;
        last.text = last.text.substr(cut);  // keep the end: the question is usually there
      }
      out.push_back(std::move(last));
      break;
    }
  }
  return out;
}

}  // namespace

double cost_of(const cloud::CloudPool& pool, const std::string& upstream, std::int64_t prompt_tokens,
               std::int64_t completion_tokens) {
  for (const auto& member : pool.config().members) {
    if (member.name == upstream) {
      return static_cast<double>(prompt_tokens) / 1000.0 * member.price_input_per_1k +
             static_cast<double>(completion_tokens) / 1000.0 * member.price_output_per_1k;
    }
  }
  return 0.0;
}

json yes_no_check(std::string_view instruction, std::string_view label, std::string_view answer,
                  std::string_view question) {
  std::string user(label);
  user += ": ";
  user += answer;
  user += "\nDoes it answer this question? Reply yes or no.\nQuestion: ";
  user += question;
  return {{"model", "verify"},
          {"max_tokens", 3},
          {"temperature", 0},
          {"messages", json::array({{{"role", "system"}, {"content", std::string(instruction)}},
                                    {{"role", "user"}, {"content", std::move(user)}}})}};
}

bool says_yes(std::string_view text) {
  const std::size_t start = text.find_first_not_of(" \t\r\n\"'");
  if (start == std::string_view::npos) return false;
  text.remove_prefix(start);
  if (text.starts_with("是")) return true;
  if (text.size() < 3) return false;
  for (std::size_t i = 0; i < 3; ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) != "yes"[i]) return false;
  }
  return true;
}

// ---- edge intent ----

awaitable<Result<Answer, AttemptError>> EdgeIntentSource::answer(const SourceRequest& request) {
  const edge::IntentPrediction* prediction = request.prediction;
  if (prediction == nullptr || prediction->is_oos || prediction->answer.empty()) {
    AttemptError error;
    error.kind = "edge_unavailable";
    error.api = ApiError::unavailable("edge_unavailable", "the edge intent engine has no answer for this request");
    co_return error;
  }
  Answer answer;
  answer.content = prediction->answer;
  answer.model = model_id_;
  answer.pool = "edge";
  answer.usage = {router::approx_prompt_tokens(request.request->messages),
                  router::approx_token_count(prediction->answer)};
  if (judge_ == nullptr) co_return answer;

  // A cheap judge: a few output tokens on the small model, never the full answer.
  const json check = yes_no_check(
      "You check the answers of a customer-service FAQ bot. Reply with one word: yes if the proposed answer "
      "answers the user's question, no otherwise.",
      "Proposed answer", prediction->answer, request.request->last_user_text());
  const auto started = Clock::now();
  auto reply = co_await judge_->complete(check, request.deadline, request.cancel);
  std::string verdict = "error";
  double cost = 0.0;
  if (reply) {
    verdict = says_yes(reply_text(reply->body)) ? "yes" : "no";
    cost = cost_of(*judge_, reply->upstream, reply->usage.prompt_tokens, reply->usage.completion_tokens);
  } else if (reply.error().kind == cloud::UpstreamErrorKind::cancelled) {
    co_return cancelled_error();
  }
  const double verify_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  if (verdict != "yes") {
    AttemptError error;
    error.kind = verdict == "no" ? "rejected" : "verify_failed";
    error.api = ApiError::unavailable("edge_rejected", "the edge answer was not confirmed");
    error.cost = cost;
    error.error_class = ErrorClass::next_level;  // quality: the next level answers instead
    co_return error;
  }
  answer.cost = cost;
  answer.source_time = since(started);
  answer.figures["verify_verdict"] = verdict;
  answer.figures["verify_ms"] = verify_ms;
  co_return answer;
}

// ---- edge LLM ----

awaitable<Result<Answer, AttemptError>> EdgeLlmSource::answer(const SourceRequest& request) {
  edge::PieceSink no_pieces;  // not `{}` in the co_await: g++ 12 mishandles braced temporaries there
  co_return co_await generate(request, std::move(no_pieces));
}

awaitable<Result<Answer, AttemptError>> EdgeLlmSource::stream(const SourceRequest& request, PieceSink sink) {
  edge::PieceSink pieces = [&sink](std::string_view text) -> awaitable<bool> {
    Piece piece{Piece::Kind::text, text};
    co_return co_await sink(piece);
  };
  co_return co_await generate(request, std::move(pieces));
}

awaitable<Result<Answer, AttemptError>> EdgeLlmSource::generate(const SourceRequest& request, edge::PieceSink sink) {
  const ChatRequest& chat = *request.request;
  // The version serving now, held to the end: a promotion or rollback meanwhile swaps the slot,
  // not the engine under this generation.
  const std::shared_ptr<const edge::LlmServing> serving = slot_.current();
  edge::LlmEngine& engine = *serving->engine;
  edge::GenerationRequest generation;
  // Only a summary of the last turns goes to the edge model; the full history stays for the cloud.
  generation.messages = engine.edge_messages(chat.messages);
  int max_tokens = chat.max_tokens ? static_cast<int>(std::min<std::int64_t>(*chat.max_tokens, 1 << 20))
                                   : engine.config().max_tokens;
  if (request.degraded) {
    generation.messages = degraded_messages(generation.messages, engine.context_tokens());
    max_tokens = std::max(1, max_tokens / 2);
  }
  generation.max_tokens = max_tokens;
  generation.stop = chat.stop;
  generation.temperature = static_cast<float>(chat.temperature.value_or(0.0));
  generation.top_p = static_cast<float>(chat.top_p.value_or(0.95));
  generation.seed = static_cast<std::uint64_t>(chat.seed.value_or(0));
  generation.deadline = request.deadline;
  // A task type with its own fine-tuned adapter generates with it.
  const std::string& task_type = chat.hengshi.task_type;
  if (!task_type.empty() && engine.has_adapter(task_type)) generation.adapter = task_type;
  std::string edge_model = engine.model_label(generation.adapter);

  const bool streamed = static_cast<bool>(sink);
  const auto started = Clock::now();
  auto result = co_await engine.generate(std::move(generation), std::move(sink), request.cancel);
  if (!result) co_return llm_error(result.error());
  if (result->finish_reason == edge::FinishReason::cancelled || request.cancel.cancelled()) {
    co_return cancelled_error();
  }
  const edge::Generation& generated = *result;
  Answer answer;
  answer.content = streamed ? std::string() : generated.text;  // a stream's text went out as pieces
  // A deadline cut is a truncated answer, which OpenAI clients know as "length".
  answer.finish_reason = generated.finish_reason == edge::FinishReason::stop ? "stop" : "length";
  answer.usage = {generated.prompt_tokens, generated.completion_tokens};
  answer.model = serving->description;
  answer.edge_model = std::move(edge_model);
  answer.pool = "edge";
  answer.source_time = since(started);
  answer.ttft = generated.first_piece;
  // Uncalibrated token-probability confidence; the router calibrates it per task type.
  answer.figures["token_min_prob"] = generated.confidence.min_prob;
  answer.figures["token_mean_prob"] = generated.confidence.mean_prob;
  answer.figures["finish"] = std::string(edge::to_string(generated.finish_reason));
  answer.figures["generation_ms"] = static_cast<double>(generated.generation.count()) / 1000.0;
  answer.figures["completion_tokens"] = generated.completion_tokens;
  co_return answer;
}

// ---- cloud ----

void CloudSource::answered(Answer& answer, const std::string& model, const std::string& upstream,
                           const cloud::Usage& usage, std::chrono::microseconds latency) const {
  answer.model = model;
  answer.upstream = upstream;
  answer.pool = pool_.name();
  answer.usage = {usage.prompt_tokens, usage.completion_tokens};
  answer.cost = cost_of(pool_, upstream, usage.prompt_tokens, usage.completion_tokens);
  answer.source_time = latency;
}

awaitable<std::optional<AttemptError>> CloudSource::answer_into(const SourceRequest& request, Answer& out) {
  cloud::CallOptions options;
  options.avoid = request.avoid;
  cloud::UpstreamReply reply;
  if (auto failed = co_await pool_.complete_into(cloud::ForwardBody(*request.request), request.deadline,
                                                 request.cancel, std::move(options), reply)) {
    co_return from_upstream(*failed);
  }
  answered(out, reply.model, reply.upstream, reply.usage, reply.latency);
  out.upstream_body = std::move(reply.body);
  out.ttft = reply.latency;
  out.finished_at = reply.settled_at;
  co_return std::nullopt;
}

awaitable<Result<Answer, AttemptError>> CloudSource::answer(const SourceRequest& request) {
  Answer answer;
  if (auto failed = co_await answer_into(request, answer)) co_return std::move(*failed);
  co_return answer;
}

awaitable<Result<Answer, AttemptError>> CloudSource::stream(const SourceRequest& request, PieceSink sink) {
  cloud::ChunkSink chunks = [&sink](std::string_view chunk, bool more) -> awaitable<bool> {
    Piece piece{Piece::Kind::upstream_chunk, chunk, more};
    co_return co_await sink(piece);
  };
  cloud::CallOptions options;
  options.avoid = request.avoid;
  options.on_chosen = request.on_answerer;
  auto summary = co_await pool_.stream(cloud::ForwardBody(*request.request), request.deadline, request.cancel, std::move(chunks),
                                       options);
  if (!summary) co_return from_upstream(summary.error());
  Answer answer;
  answered(answer, summary->model, summary->upstream, summary->usage, summary->latency);
  answer.pieces_carry_finish = true;
  answer.ttft = summary->ttft;
  co_return answer;
}

// ---- canned ----

awaitable<Result<Answer, AttemptError>> CannedSource::answer(const SourceRequest& request) {
  (void)request;
  Answer answer;
  answer.content = std::string(text_);
  answer.model = std::string(model_);
  co_return answer;
}

}  // namespace hengshi::chain
