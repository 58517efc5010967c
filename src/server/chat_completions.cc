#include "server/chat_completions.h"

#include <array>
#include <atomic>
#include <charconv>
#include <random>

#include "core/json_text.h"
#include "server/auth_metrics.h"
#include "server/key_errors.h"
#include "server/key_store.h"
#include "server/server_metrics.h"
#include "server/openai_format.h"
#include "server/sse.h"

namespace hengshi::server {
namespace {

using nlohmann::json;
using std::chrono::duration_cast;
using std::chrono::microseconds;

std::int64_t micros_since(Clock::time_point start) {
  return duration_cast<microseconds>(Clock::now() - start).count();
}

bool is_json_content_type(std::string_view value) {
  auto semicolon = value.find(';');
  std::string_view media = value.substr(0, semicolon);
  while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
  std::string lowered(media);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lowered == "application/json";
}

template <typename Message>
void set_meta_headers(Message& message, const ResponseMeta& meta) {
  message.set("X-Hengshi-Request-Id", meta.request_id);
  message.set("X-Hengshi-Route", meta.decision.route);
  message.set("X-Hengshi-Reason", meta.decision.reason);
  message.set("X-Hengshi-Cache", meta.cache);
}

}  // namespace

double cost_of(const cloud::CloudPool& pool, const std::string& upstream, const cloud::Usage& usage) {
  for (const auto& member : pool.config().members) {
    if (member.name == upstream) {
      return static_cast<double>(usage.prompt_tokens) / 1000.0 * member.price_input_per_1k +
             static_cast<double>(usage.completion_tokens) / 1000.0 * member.price_output_per_1k;
    }
  }
  return 0.0;
}

std::string new_request_id() {
  // Unique per process run and cheap: a random prefix drawn once plus a counter.
  static const std::string prefix = [] {
    std::random_device device;
    char buffer[17];
    std::snprintf(buffer, sizeof(buffer), "%08x", device());
    return std::string(buffer);
  }();
  static std::atomic<std::uint64_t> counter{0};
  return "hs-" + prefix + "-" + std::to_string(counter.fetch_add(1) + 1);
}

Result<Ok, ApiError> apply_extension_headers(const http::request<http::string_body>& request,
                                             HengshiExtension& extension) {
  auto bounded = [](std::string_view value, std::size_t limit, const char* header) -> Result<std::string, ApiError> {
    if (value.size() > limit) {
      return ApiError::invalid_request("invalid_value",
                                       std::string(header) + " must be at most " + std::to_string(limit) + " bytes",
                                       header);
    }
    return std::string(value);
  };
  if (auto it = request.find("X-Hengshi-Task-Type"); it != request.end() && extension.task_type.empty()) {
    auto value = bounded(to_std(it->value()), kMaxTaskTypeBytes, "X-Hengshi-Task-Type");
    if (!value) return value.error();
    extension.task_type = std::move(*value);
  }
  if (auto it = request.find("X-Hengshi-Session"); it != request.end() && extension.session_id.empty()) {
    auto value = bounded(to_std(it->value()), kMaxSessionIdBytes, "X-Hengshi-Session");
    if (!value) return value.error();
    extension.session_id = std::move(*value);
  }
  if (auto it = request.find("X-Hengshi-Deadline-Ms"); it != request.end() && !extension.deadline_ms) {
    std::string_view text = to_std(it->value());
    std::int64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || value <= 0) {
      return ApiError::invalid_request("invalid_header",
                                       "X-Hengshi-Deadline-Ms must be a positive integer (milliseconds)",
                                       "X-Hengshi-Deadline-Ms");
    }
    auto checked = check_deadline_ms(value, "X-Hengshi-Deadline-Ms");
    if (!checked) return checked.error();
    extension.deadline_ms = *checked;
  }
  return Ok{};
}

awaitable<bool> ChatCompletions::finish_stream_with_meta(HttpExchange& exchange, const ResponseMeta& meta) {
  // The metadata travels in a final chunk with no choices, the shape OpenAI uses for usage.
  json final_chunk = {{"id", meta.request_id},
                      {"object", "chat.completion.chunk"},
                      {"created", unix_seconds_now()},
                      {"model", meta.model},
                      {"choices", json::array()},
                      {"hengshi", client_meta(meta)}};
  std::string event = sse_event(dump_text(final_chunk));
  if (!co_await exchange.write_chunk(event)) co_return false;
  if (!co_await exchange.write_chunk(kSseDone)) co_return false;
  co_return co_await exchange.finish_stream();
}

awaitable<bool> ChatCompletions::start_stream(HttpExchange& exchange, const ResponseMeta& meta) {
  http::response<http::empty_body> head{http::status::ok, exchange.request().version()};
  set_meta_headers(head, meta);
  co_return co_await exchange.start_stream(std::move(head));
}

awaitable<bool> ChatCompletions::send_answer(HttpExchange& exchange, const ChatRequest& request,
                                             ResponseMeta& meta, const std::string& content,
                                             const std::string& finish_reason,
                                             const cloud::Usage& usage) {
  const TokenUsage tokens{usage.prompt_tokens, usage.completion_tokens};
  if (!request.stream) {
    Response response{http::status::ok, exchange.request().version()};
    response.set(http::field::content_type, "application/json");
    set_meta_headers(response, meta);
    json body = completion_object(meta.request_id, meta.model, content, finish_reason, tokens);
    body["hengshi"] = client_meta(meta);
    response.body() = dump_text(body);
    co_return co_await exchange.send(std::move(response));
  }
  if (!co_await start_stream(exchange, meta)) co_return false;
  // Same event sequence as OpenAI: role, content, finish_reason, [usage], then our metadata.
  std::array<json, 3> chunks = {
      completion_chunk(meta.request_id, meta.model, {{"role", "assistant"}, {"content", ""}}, ""),
      completion_chunk(meta.request_id, meta.model, {{"content", content}}, ""),
      completion_chunk(meta.request_id, meta.model, json::object(), finish_reason)};
  for (const json& chunk : chunks) {
    std::string event = sse_event(dump_text(chunk));
    if (!co_await exchange.write_chunk(event)) co_return false;
  }
  if (request.include_usage) {
    std::string event = sse_event(dump_text(usage_chunk(meta.request_id, meta.model, tokens)));
    if (!co_await exchange.write_chunk(event)) co_return false;
  }
  co_return co_await finish_stream_with_meta(exchange, meta);
}

awaitable<void> ChatCompletions::respond_configured(HttpExchange& exchange, ChatRequest& request,
                                                    ResponseMeta& meta, const router::RouterPolicy& policy) {
  meta.attempts = 0;
  meta.overhead_us = micros_since(exchange.received_at());
  if (meta.decision.reason == "deadline_exceeded") {
    co_await send_error(exchange,
                        ApiError::gateway_timeout("deadline_exceeded",
                                                  "the request's deadline had passed before it could be routed "
                                                  "(hengshi.deadline_ms / X-Hengshi-Deadline-Ms)"),
                        &meta);
    log_request(exchange, request, meta, "deadline_exceeded", {}, 0);
    co_return;
  }
  // A human hand-off or the PII safe message: a normal answer the gateway writes itself.
  const bool human = meta.decision.route == "human";
  meta.model = human ? "hengshi-human-handoff" : "hengshi-safe-reply";
  meta.cost = 0.0;
  const std::string& content = human ? policy.human_message : policy.pii_safe_message;
  bool delivered = co_await send_answer(exchange, request, meta, content, "stop", {});
  if (!delivered) ServerMetrics::count_disconnect("writing_response");
  log_request(exchange, request, meta, delivered ? "ok" : "client_closed", {}, 0);
}

awaitable<void> ChatCompletions::send_error(HttpExchange& exchange, const ApiError& error,
                                            const ResponseMeta* meta) {
  Response response{static_cast<http::status>(error.status), exchange.request().version()};
  response.set(http::field::content_type, "application/json");
  json body = error.to_json();
  if (meta) {
    set_meta_headers(response, *meta);
    body["hengshi"] = client_meta(*meta);
  }
  if (error.status == 429) response.set(http::field::retry_after, "1");
  response.body() = dump_text(body);
  co_await exchange.send(std::move(response));
}

awaitable<void> ChatCompletions::handle(HttpExchange& exchange) {
  const auto& http_request = exchange.request();
  std::string_view content_type = to_std(http_request[http::field::content_type]);
  if (!is_json_content_type(content_type)) {
    co_await send_error(exchange,
                        ApiError::unsupported_media_type(
                            "Content-Type must be application/json (got '" + std::string(content_type) + "')"),
                        nullptr);
    co_return;
  }
  auto parsed = parse_chat_request(http_request.body());
  if (!parsed) {
    co_await send_error(exchange, parsed.error(), nullptr);
    co_return;
  }
  ChatRequest& request = *parsed;
  if (auto headers = apply_extension_headers(http_request, request.hengshi); !headers) {
    co_await send_error(exchange, headers.error(), nullptr);
    co_return;
  }
  // Client keys (GatewayHandler authenticated it): the model must be one the key may use.
  const ClientKey* key = exchange.client_key().get();
  if (key && !key->allows_model(request.model)) {
    AuthMetrics::count_failure("model_not_allowed");
    co_await send_error(exchange, key_errors::model_not_allowed(key->name, request.model), nullptr);
    co_return;
  }

  ResponseMeta meta;
  meta.request_id = new_request_id();
  if (key) meta.key = key->name;
  const auto budget = std::chrono::milliseconds(
      request.hengshi.deadline_ms.value_or(config_.server.default_deadline_ms));
  const Deadline deadline(exchange.received_at() + budget);

  // The intent model runs inline (microseconds); decide() needs its confidence.
  edge::IntentPrediction prediction;
  router::RouteInput input = router::route_input(request, deadline.remaining().count());
  // A session id means something only within its key: two keys' "s1" are two sessions.
  if (key && !input.session_id.empty()) input.session_id = key->name + '\x1f' + input.session_id;
  if (edge_.intent) {
    prediction = edge_.intent->predict(input.last_user_text);
    input.prediction = &prediction;
  }
  input.llm_available = edge_.llm != nullptr;
  input.default_pool = config_.routing.default_pool;
  input.pools = pool_names_;
  const auto policy = router_.policy();  // one snapshot for the whole request
  meta.decision = router_.decide(input, *policy);
  ServerMetrics::count_decision(meta.decision.route, meta.decision.reason);

  if (meta.decision.route == "edge") {
    if (meta.decision.edge_engine == "llm") {
      co_await respond_edge_llm(exchange, request, meta, deadline);
    } else {
      co_await respond_edge_intent(exchange, request, meta, prediction, deadline);
    }
    co_return;
  }
  if (meta.decision.route == "human" || meta.decision.route == "refuse") {
    co_await respond_configured(exchange, request, meta, *policy);
    co_return;
  }

  co_await respond_cloud(exchange, request, meta, deadline);
}

awaitable<void> ChatCompletions::respond_cloud(HttpExchange& exchange, ChatRequest& request,
                                               ResponseMeta& meta, Deadline deadline) {
  auto pool_it = pools_.find(meta.decision.route);
  // Checked here, where every cloud answer starts, so no path reaches a pool the key may not use.
  if (const ClientKey* key = exchange.client_key().get(); key && !key->allows_pool(meta.decision.route)) {
    AuthMetrics::count_failure("pool_not_allowed");
    co_await send_error(exchange, key_errors::pool_not_allowed(key->name, meta.decision.route), &meta);
    log_request(exchange, request, meta, "pool_not_allowed", {}, 0);
    co_return;
  }
  if (pool_it == pools_.end() || pool_it->second == nullptr) {
    co_await send_error(exchange,
                        ApiError::unavailable("route_unavailable",
                                              "route '" + meta.decision.route + "' has no configured target"),
                        &meta);
    log_request(exchange, request, meta, "route_unavailable", {}, 0);
    co_return;
  }
  if (request.stream) {
    co_await respond_stream(exchange, request, meta, *pool_it->second, deadline);
  } else {
    co_await respond_json(exchange, request, meta, *pool_it->second, deadline);
  }
}

awaitable<void> ChatCompletions::respond_json(HttpExchange& exchange, ChatRequest& request,
                                              ResponseMeta& meta, cloud::CloudPool& pool,
                                              Deadline deadline) {
  meta.attempts += 1;
  auto reply = co_await pool.complete(request.body, deadline, exchange.client_gone());
  if (!reply) {
    const auto& error = reply.error();
    meta.upstream = error.upstream;
    meta.overhead_us = micros_since(exchange.received_at());
    if (error.kind == cloud::UpstreamErrorKind::cancelled || exchange.client_gone().cancelled()) {
      ServerMetrics::count_disconnect("waiting_upstream");
      exchange.force_close();
      log_request(exchange, request, meta, "client_closed", {}, 0);
      co_return;
    }
    co_await send_error(exchange, error.to_api_error(), &meta);
    log_request(exchange, request, meta, cloud::to_string(error.kind), {}, 0);
    co_return;
  }

  meta.model = reply->model;
  meta.upstream = reply->upstream;
  router_.runtime().observe_cloud_latency(pool.name(), static_cast<double>(reply->latency.count()) / 1000.0,
                                          std::chrono::steady_clock::now());
  // A rejected edge answer's verification call is part of this request's bill.
  meta.cost = cost_of(pool, reply->upstream, reply->usage) + meta.decision.figures.value("verify_cost", 0.0);
  ServerMetrics::count_tokens(pool.name(), reply->usage.prompt_tokens, reply->usage.completion_tokens,
                              *meta.cost);

  Response response{http::status::ok, exchange.request().version()};
  response.set(http::field::content_type, "application/json");
  set_meta_headers(response, meta);
  // Overhead is measured just before serialising: everything but the upstream's own time.
  meta.overhead_us = std::max<std::int64_t>(0, micros_since(exchange.received_at()) - reply->latency.count());
  response.set("X-Hengshi-Overhead-Us", std::to_string(meta.overhead_us));
  reply->body["hengshi"] = client_meta(meta);
  response.body() = dump_text(reply->body);
  ServerMetrics::observe_overhead(static_cast<double>(meta.overhead_us) / 1e6);
  bool delivered = co_await exchange.send(std::move(response));
  if (!delivered) ServerMetrics::count_disconnect("writing_response");
  log_request(exchange, request, meta, delivered ? "ok" : "client_closed", reply->usage, 0);
}

awaitable<void> ChatCompletions::respond_stream(HttpExchange& exchange, ChatRequest& request,
                                                ResponseMeta& meta, cloud::CloudPool& pool,
                                                Deadline deadline) {
  meta.attempts += 1;
  bool started = false;
  bool client_ok = true;
  cloud::ChunkSink sink = [&](std::string_view chunk) -> awaitable<bool> {
    if (!started) {
      started = true;
      if (!co_await start_stream(exchange, meta)) {
        client_ok = false;
        co_return false;
      }
    }
    client_ok = co_await exchange.write_chunk(sse_event(chunk));
    co_return client_ok;
  };

  auto summary = co_await pool.stream(request.body, deadline, exchange.client_gone(), sink);
  if (!summary) {
    const auto& error = summary.error();
    meta.upstream = error.upstream;
    meta.overhead_us = micros_since(exchange.received_at());
    if (!client_ok || error.kind == cloud::UpstreamErrorKind::cancelled ||
        exchange.client_gone().cancelled()) {
      ServerMetrics::count_disconnect(started ? "streaming" : "waiting_upstream");
      exchange.force_close();
      log_request(exchange, request, meta, "client_closed", {}, 0);
      co_return;
    }
    if (!started) {
      co_await send_error(exchange, error.to_api_error(), &meta);
    } else {
      // Headers are gone: report the failure in-band as an error event, then end the stream.
      json event = error.to_api_error().to_json();
      event["hengshi"] = client_meta(meta);
      co_await exchange.write_chunk(sse_event(dump_text(event)));
      co_await exchange.finish_stream();
      exchange.force_close();
    }
    log_request(exchange, request, meta, cloud::to_string(error.kind), {}, 0);
    co_return;
  }

  meta.model = summary->model;
  meta.upstream = summary->upstream;
  router_.runtime().observe_cloud_latency(pool.name(), static_cast<double>(summary->latency.count()) / 1000.0,
                                          std::chrono::steady_clock::now());
  meta.cost = cost_of(pool, summary->upstream, summary->usage) + meta.decision.figures.value("verify_cost", 0.0);
  meta.overhead_us =
      std::max<std::int64_t>(0, micros_since(exchange.received_at()) - summary->latency.count());
  ServerMetrics::count_tokens(pool.name(), summary->usage.prompt_tokens,
                              summary->usage.completion_tokens, *meta.cost);
  ServerMetrics::observe_overhead(static_cast<double>(meta.overhead_us) / 1e6);
  if (!started && !co_await start_stream(exchange, meta)) {
    log_request(exchange, request, meta, "client_closed", summary->usage, summary->ttft.count());
    co_return;
  }
  bool delivered = co_await finish_stream_with_meta(exchange, meta);
  if (!delivered) ServerMetrics::count_disconnect("streaming");
  log_request(exchange, request, meta, delivered ? "ok" : "client_closed", summary->usage,
              summary->ttft.count());
}

void ChatCompletions::log_request(const HttpExchange& exchange, const ChatRequest& request,
                                  const ResponseMeta& meta, const std::string& outcome,
                                  const cloud::Usage& usage, std::int64_t ttft_us) {
  charge_key(exchange, meta, usage);
  if (!log_.enabled()) return;
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  json record = meta.to_json();
  record["id"] = meta.request_id;
  record.erase("request_id");
  record["outcome"] = outcome;
  record["status"] = exchange.status();
  record["stream"] = request.stream;
  // Caller-chosen text: a phone number used as a session id must not reach the log.
  const auto policy = router_.policy();
  record["session"] = or_null(policy->pii.redact(request.hengshi.session_id));
  record["task_type"] = or_null(policy->pii.redact(request.hengshi.task_type));
  record["requested_model"] = policy->pii.redact(request.model);
  record["latency_us"] = {{"total", micros_since(exchange.received_at())}, {"ttft", ttft_us}};
  record["tokens"] = {{"prompt", usage.prompt_tokens}, {"completion", usage.completion_tokens}};
  log_.write(std::move(record));
}

void ChatCompletions::charge_key(const HttpExchange& exchange, const ResponseMeta& meta,
                                 const cloud::Usage& usage) {
  const ClientKey* key = exchange.client_key().get();
  if (key == nullptr || key_limits_ == nullptr) return;
  const std::int64_t tokens = usage.prompt_tokens + usage.completion_tokens;
  const double cost = meta.cost.value_or(0.0);
  key_limits_->charge(*key, tokens, cost, LimitClock::now());
  AuthMetrics::charge(key->name, static_cast<long>(tokens), cost);
}

}  // namespace hengshi::server
