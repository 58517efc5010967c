// The edge half of ChatCompletions: answers from the intent engine (a canned answer, inline) and
// from the embedded LLM (generated on its worker pool, streamed piece by piece).
#include <chrono>

#include "router/complexity.h"
#include "server/chat_completions.h"
#include "server/openai_format.h"
#include "core/json_text.h"
#include "server/server_metrics.h"
#include "server/sse.h"

namespace hengshi::server {
namespace {

using nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The judge's verdict: its answer starts with "yes" (any case) or 是, past quotes and spaces.
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

ApiError edge_unavailable(const std::string& what) {
  return ApiError::unavailable("edge_unavailable", "the edge " + what + " is not configured on this gateway");
}

// llama.cpp engine errors as the client sees them.
ApiError llm_api_error(const Error& error) {
  if (error.code == "edge_llm_busy") {
    ApiError api = ApiError::unavailable("edge_llm_busy", error.message);
    api.status = 429;
    api.type = "rate_limit_error";
    return api;
  }
  if (error.code == "prompt_too_long") {
    return ApiError::invalid_request("context_length_exceeded", error.message, "messages");
  }
  if (error.code == "prompt_empty") return ApiError::invalid_request("prompt_empty", error.message, "messages");
  if (error.code == "edge_llm_stopped") return ApiError::unavailable("edge_llm_stopped", error.message);
  return ApiError::internal("edge LLM failed: " + error.message);
}

std::string finish_reason_of(edge::FinishReason reason) {
  // A deadline cut is a truncated answer, which OpenAI clients know as "length".
  return reason == edge::FinishReason::stop ? "stop" : "length";
}

}  // namespace

awaitable<bool> ChatCompletions::verify_edge_answer(HttpExchange& exchange, const ChatRequest& request,
                                                    ResponseMeta& meta,
                                                    const edge::IntentPrediction& prediction,
                                                    cloud::CloudPool& pool, Deadline deadline) {
  // A cheap judge: a few output tokens on the small model, never the full answer.
  const std::string question = request.last_user_text();
  json check = {{"model", "verify"},
                {"max_tokens", 3},
                {"temperature", 0},
                {"messages",
                 json::array({{{"role", "system"},
                               {"content",
                                "You check the answers of a customer-service FAQ bot. Reply with one "
                                "word: yes if the proposed answer answers the user's question, no "
                                "otherwise."}},
                              {{"role", "user"},
                               {"content", "Proposed answer: " + prediction.answer +
                                               "\nDoes it answer this question? Reply yes or no.\nQuestion: " +
                                               question}}})}};
  meta.attempts += 1;
  const auto started = Clock::now();
  auto reply = co_await pool.complete(check, deadline, exchange.client_gone());
  std::string verdict = "error";
  if (reply) {
    const json& choices = reply->body.value("choices", json::array());
    std::string text;
    if (!choices.empty() && choices[0].contains("message") && choices[0]["message"].value("content", json()).is_string()) {
      text = choices[0]["message"]["content"].get<std::string>();
    }
    verdict = says_yes(text) ? "yes" : "no";
    const double cost = cost_of(pool, reply->upstream, reply->usage);
    meta.decision.figures["verify_cost"] = cost;
    ServerMetrics::count_tokens(pool.name(), reply->usage.prompt_tokens, reply->usage.completion_tokens, cost);
  }
  meta.decision.figures["verify_verdict"] = verdict;
  meta.decision.figures["verify_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  ServerMetrics::count_verification(verdict);
  co_return verdict == "yes";
}

awaitable<void> ChatCompletions::respond_edge_intent(HttpExchange& exchange, ChatRequest& request,
                                                     ResponseMeta& meta,
                                                     const edge::IntentPrediction& prediction,
                                                     Deadline deadline) {
  if (!edge_.intent) {
    meta.overhead_us = 0;
    co_await send_error(exchange, edge_unavailable("intent model (edge.intent_model)"), &meta);
    log_request(exchange, request, meta, "edge_unavailable", {}, 0);
    co_return;
  }
  if (meta.decision.reason == "middle_band_verify") {
    auto pool = pools_.find("cloud-small");
    bool accepted = false;
    if (pool != pools_.end() && pool->second != nullptr) {
      accepted = co_await verify_edge_answer(exchange, request, meta, prediction, *pool->second, deadline);
    }
    if (exchange.client_gone().cancelled()) {
      ServerMetrics::count_disconnect("waiting_upstream");
      exchange.force_close();
      log_request(exchange, request, meta, "client_closed", {}, 0);
      co_return;
    }
    if (!accepted) {
      // Not confirmed: the small cloud model answers instead; the edge was not good enough.
      meta.decision.route = "cloud-small";
      meta.decision.edge_engine.clear();
      meta.decision.reason = "middle_band_rejected";
      meta.decision.fallback_type = "quality";
      co_await respond_cloud(exchange, request, meta, deadline);
      co_return;
    }
    meta.decision.reason = "middle_band_verified";
  }
  const auto started = Clock::now();
  const double verify_cost = meta.decision.figures.value("verify_cost", 0.0);
  meta.attempts += 1;
  meta.model = edge_.intent_model_id();
  meta.cost = verify_cost;
  cloud::Usage usage{router::approx_prompt_tokens(request.messages), router::approx_token_count(prediction.answer)};
  meta.overhead_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() -
                                                                           exchange.received_at())
                         .count();
  ServerMetrics::observe_overhead(static_cast<double>(meta.overhead_us) / 1e6);
  ServerMetrics::count_tokens("edge", usage.prompt_tokens, usage.completion_tokens, 0.0);
  bool delivered = co_await send_answer(exchange, request, meta, prediction.answer, "stop", usage);
  ServerMetrics::observe_edge("intent", delivered ? "ok" : "client_closed", seconds_since(started));
  if (!delivered) ServerMetrics::count_disconnect("writing_response");
  log_request(exchange, request, meta, delivered ? "ok" : "client_closed", usage, 0);
}

awaitable<void> ChatCompletions::respond_edge_llm(HttpExchange& exchange, ChatRequest& request,
                                                  ResponseMeta& meta, Deadline deadline) {
  if (!edge_.llm) {
    co_await send_error(exchange, edge_unavailable("LLM (edge.llm.model_path)"), &meta);
    log_request(exchange, request, meta, "edge_unavailable", {}, 0);
    co_return;
  }
  meta.attempts += 1;
  meta.model = edge_.llm_model_id();
  meta.cost = 0.0;

  edge::GenerationRequest generation;
  // Only a summary of the last turns goes to the edge model; the full history stays for the cloud.
  generation.messages = edge_.llm->edge_messages(request.messages);
  if (request.max_tokens) generation.max_tokens = static_cast<int>(std::min<std::int64_t>(*request.max_tokens, 1 << 20));
  generation.stop = request.stop;
  generation.temperature = static_cast<float>(request.temperature.value_or(0.0));
  generation.top_p = static_cast<float>(request.top_p.value_or(0.95));
  generation.seed = static_cast<std::uint64_t>(request.seed.value_or(0));
  generation.deadline = deadline;

  bool started = false;
  bool client_ok = true;
  edge::PieceSink on_piece;
  if (request.stream) {
    on_piece = [&](std::string_view piece) -> awaitable<bool> {
      if (!started) {
        started = true;
        client_ok = co_await start_stream(exchange, meta);
        if (client_ok) {
          json role = completion_chunk(meta.request_id, meta.model, {{"role", "assistant"}, {"content", ""}}, "");
          client_ok = co_await exchange.write_chunk(sse_event(dump_text(role)));
        }
        if (!client_ok) co_return false;
      }
      json delta = {{"content", std::string(piece)}};
      json chunk = completion_chunk(meta.request_id, meta.model, std::move(delta), "");
      client_ok = co_await exchange.write_chunk(
          sse_event(dump_text(chunk)));
      co_return client_ok;
    };
  }

  const auto submitted = Clock::now();
  auto result = co_await edge_.llm->generate(std::move(generation), on_piece, exchange.client_gone());
  const double engine_seconds = seconds_since(submitted);
  meta.overhead_us = std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - exchange.received_at()).count() -
             static_cast<std::int64_t>(engine_seconds * 1e6));

  const bool client_left = !client_ok || exchange.client_gone().cancelled() ||
                           (result && result->finish_reason == edge::FinishReason::cancelled);
  if (client_left) {
    ServerMetrics::observe_edge("llm", "client_closed", engine_seconds);
    ServerMetrics::count_disconnect(started ? "streaming" : "waiting_upstream");
    exchange.force_close();
    log_request(exchange, request, meta, "client_closed", {}, 0);
    co_return;
  }
  if (!result) {
    ServerMetrics::observe_edge("llm", result.error().code, engine_seconds);
    ApiError error = llm_api_error(result.error());
    if (!started) {
      co_await send_error(exchange, error, &meta);
    } else {
      json event = error.to_json();
      event["hengshi"] = client_meta(meta);
      co_await exchange.write_chunk(sse_event(dump_text(event)));
      co_await exchange.finish_stream();
      exchange.force_close();
    }
    log_request(exchange, request, meta, result.error().code, {}, 0);
    co_return;
  }

  const edge::Generation& answer = *result;
  // Uncalibrated token-probability confidence; the router calibrates it per task type.
  meta.decision.confidence = answer.confidence.mean_prob;
  meta.decision.figures["token_min_prob"] = answer.confidence.min_prob;
  meta.decision.figures["token_mean_prob"] = answer.confidence.mean_prob;
  meta.decision.figures["finish"] = std::string(edge::to_string(answer.finish_reason));
  cloud::Usage usage{answer.prompt_tokens, answer.completion_tokens};
  router_.runtime().observe_edge_llm(static_cast<double>(answer.first_piece.count()) / 1000.0,
                                     answer.completion_tokens,
                                     static_cast<double>(answer.generation.count()) / 1000.0);
  ServerMetrics::count_tokens("edge", usage.prompt_tokens, usage.completion_tokens, 0.0);
  ServerMetrics::observe_overhead(static_cast<double>(meta.overhead_us) / 1e6);
  const std::string finish = finish_reason_of(answer.finish_reason);
  const auto ttft_us = std::chrono::duration_cast<std::chrono::microseconds>(answer.first_piece).count();

  bool delivered = false;
  if (!started) {
    // Not streaming, or a stream whose answer had no text: the whole answer at once.
    delivered = co_await send_answer(exchange, request, meta, answer.text, finish, usage);
  } else {
    json last = completion_chunk(meta.request_id, meta.model, json::object(), finish);
    delivered = co_await exchange.write_chunk(sse_event(dump_text(last)));
    if (delivered && request.include_usage) {
      json usage_event = usage_chunk(meta.request_id, meta.model, {usage.prompt_tokens, usage.completion_tokens});
      delivered = co_await exchange.write_chunk(sse_event(dump_text(usage_event)));
    }
    if (delivered) delivered = co_await finish_stream_with_meta(exchange, meta);
  }
  ServerMetrics::observe_edge("llm", delivered ? "ok" : "client_closed", engine_seconds);
  if (!delivered) ServerMetrics::count_disconnect(request.stream ? "streaming" : "writing_response");
  log_request(exchange, request, meta, delivered ? "ok" : "client_closed", usage, ttft_us);
}

}  // namespace hengshi::server
