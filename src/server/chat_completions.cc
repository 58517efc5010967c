#include "server/chat_completions.h"

#include <array>
#include <atomic>
#include <charconv>
#include <random>

#include <boost/beast/core/string.hpp>

#include "core/header_field.h"
#include "core/json_text.h"
#include "edge/intent_dataset.h"
#include "edge/intent_engine.h"
#include "server/auth_metrics.h"
#include "server/cache_control.h"
#include "server/key_errors.h"
#include "server/key_store.h"
#include "server/server_metrics.h"
#include "server/openai_format.h"
#include "server/response_writer.h"
#include "server/sse.h"

namespace hengshi::server {

using namespace std::string_view_literals;

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
  // In place: a lowered copy was an allocation ("application/json" outgrows the inline buffer).
  return boost::beast::iequals(boost::beast::string_view(media.data(), media.size()), "application/json");
}

// Whether the plan's first step answers without a cloud call or a queue (the intent engine, a
// hand-off, the safe reply): those keep priority under pressure.
// A borderline cache hit's check: one yes/no token from cloud-small (a free function: its
// parameters live in the coroutine's frame, which a lambda coroutine's captures would not).
awaitable<bool> confirm_cached_answer(cloud::CloudPool& judge, std::string question, std::string answer,
                                      Deadline deadline, CancelToken cancel) {
  const json check = chain::yes_no_check(
      "You check a cache of answers. Reply with one word: yes if the stored answer answers the user's "
      "question exactly as asked, no otherwise.",
      "Stored answer", answer, question);
  auto reply = co_await judge.complete(check, deadline, std::move(cancel));
  co_return reply && chain::says_yes(chain::reply_text(reply->body));
}

bool answers_without_cloud(const Plan& plan) {
  if (plan.steps.empty()) return true;
  const Source first = plan.steps.front().source;
  return first == Source::edge_intent || first == Source::human_handoff || first == Source::safe_reply;
}

}  // namespace

std::string new_request_id() {
  // Unique per process run and cheap: a random prefix drawn once plus a counter.
  static const std::string prefix = [] {
    std::random_device device;
    char buffer[17];
    std::snprintf(buffer, sizeof(buffer), "%08x", device());
    return std::string(buffer);
  }();
  static std::atomic<std::uint64_t> counter{0};
  // Written into one buffer: "hs-" + prefix + "-" + to_string() built three heap strings.
  char digits[20];
  const auto end =
      std::to_chars(std::begin(digits), std::end(digits), counter.fetch_add(1) + 1).ptr;
  std::string id;
  id.reserve(3 + prefix.size() + 1 + static_cast<std::size_t>(end - digits));
  id.append("hs-").append(prefix).append("-").append(digits, end);
  return id;
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

struct ChatCompletions::RequestSources {
  chain::CannedSource human;
  chain::CannedSource safe;
  chain::CannedSource last_resort;
  const ClientKey* key = nullptr;  // the request's client key (null when auth is off)
};

namespace {

// The all-cloud counterfactual prices every answer at cloud-large's (its members' mean); without
// a cloud-large pool, at the dearest pool's.
TokenPrices all_cloud_prices(const std::map<std::string, cloud::CloudPool*>& pools) {
  auto mean_of = [](const cloud::CloudPool& pool) {
    TokenPrices prices;
    const auto& members = pool.config().members;
    for (const auto& member : members) {
      prices.input_per_1k += member.price_input_per_1k / static_cast<double>(members.size());
      prices.output_per_1k += member.price_output_per_1k / static_cast<double>(members.size());
    }
    return prices;
  };
  if (auto large = pools.find("cloud-large"); large != pools.end() && large->second != nullptr) {
    return mean_of(*large->second);
  }
  TokenPrices dearest;
  for (const auto& [name, pool] : pools) {
    if (pool == nullptr) continue;
    const TokenPrices prices = mean_of(*pool);
    if (prices.input_per_1k + prices.output_per_1k > dearest.input_per_1k + dearest.output_per_1k) dearest = prices;
  }
  return dearest;
}

}  // namespace

ChatCompletions::ChatCompletions(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                                 const edge::EdgeEngines& edge, router::Router& router,
                                 obs::RequestLog& request_log)
    : config_(config), pools_(std::move(pools)), edge_(edge), router_(router), log_(request_log) {
  for (const auto& [name, pool] : pools_) {
    if (pool == nullptr) continue;
    pool_names_.push_back(name);
    if (auto route = route_from_string(name); route && is_cloud(*route)) {
      clouds_[*route == Route::cloud_small ? Source::cloud_small : Source::cloud_large] =
          std::make_unique<chain::CloudSource>(*pool);
    }
  }
  if (edge_.intent) {
    edge_intent_ = std::make_unique<chain::EdgeIntentSource>(edge_.intent_model_id(), nullptr);
    auto judge = pools_.find("cloud-small");
    edge_intent_verified_ = std::make_unique<chain::EdgeIntentSource>(
        edge_.intent_model_id(), judge == pools_.end() ? nullptr : judge->second);
  }
  if (edge_.llm) edge_llm_ = std::make_unique<chain::EdgeLlmSource>(*edge_.llm);
  chain::ChainHooks hooks;
  hooks.on_cloud_outcome = [this](const chain::AttemptError* error) {
    if (offline_ == nullptr) return;
    if (error == nullptr) {
      offline_->record_cloud_outcome(std::nullopt);
    } else if (error->upstream_kind) {
      offline_->record_cloud_outcome(*error->upstream_kind);
    }
  };
  hooks.on_cloud_latency = [this](const std::string& pool, double latency_ms,
                                  Clock::time_point at) {
    router_.runtime().observe_cloud_latency(pool, latency_ms, at);
  };
  chain_ = std::make_unique<chain::Chain>(config_.chain, std::move(hooks));
  counterfactual_prices_ = all_cloud_prices(pools_);
  auto shadow_pool = pools_.find("cloud-small");
  shadow_ = std::make_unique<chain::ShadowRunner>(
      config_.chain.shadow, shadow_pool == pools_.end() ? nullptr : shadow_pool->second, log_);
}

void ChatCompletions::stop_shadows() { shadow_->stop(); }

ChatCompletions::~ChatCompletions() = default;

awaitable<void> ChatCompletions::send_error(HttpExchange& exchange, const ApiError& error,
                                            const ResponseMeta* meta) {
  ChatRequest none;
  ResponseWriter writer(exchange, none, config_.server.expose_figures);
  co_await writer.write_error(error, meta);
}

awaitable<void> ChatCompletions::handle(HttpExchange& exchange) {
  const auto& http_request = exchange.request();
  std::string_view content_type = field_value(http_request, http::field::content_type);
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
  // The budget, parsed once: from here down every wait is bounded by it.
  const Budget budget(
      Deadline(exchange.received_at() +
               std::chrono::milliseconds(request.hengshi.deadline_ms.value_or(config_.server.default_deadline_ms))),
      config_.chain.shares_for(request.hengshi.task_type));

  // The intent model runs inline (microseconds); decide() needs its confidence.
  edge::IntentPrediction prediction;
  router::RouteInput input = router::route_input(request, budget);
  // A session id means something only within its key: two keys' "s1" are two sessions.
  if (key && !input.session_id.empty()) input.session_id = key->name + '\x1f' + input.session_id;
  const bool edge_up = offline_ == nullptr || offline_->edge_worth_trying();
  if (edge_.intent && edge_up) {
    prediction = edge_.intent->predict(input.last_user_text);
    input.prediction = &prediction;
  }
  input.llm_available = edge_.llm != nullptr && edge_up;
  input.default_pool = config_.routing.default_pool;
  input.pools = pool_names_;
  input.offline = offline_ != nullptr && offline_->offline();
  input.offline_threshold = config_.chain.offline.edge_threshold;
  const std::string& last_resort = config_.chain.last_resort.kind;
  input.last_resort = last_resort == "error"sv   ? std::nullopt
                      : last_resort == "human"sv ? std::optional<Source>(Source::human_handoff)
                                                 : std::optional<Source>(Source::last_resort_reply);
  const auto policy = router_.policy();  // one snapshot for the whole request
  meta.decision = router_.decide(input, *policy);
  meta.offline = meta.decision.reason == Reason::offline;
  ServerMetrics::count_decision(to_string(meta.decision.route), to_string(meta.decision.reason));

  if (meta.decision.plan.steps.empty() && meta.decision.reason != Reason::deadline_exceeded) {
    // Nothing on this gateway can serve what was asked for (a pinned engine that is not configured).
    meta.overhead_us = micros_since(exchange.received_at());
    const bool edge = meta.decision.route == Route::edge;
    co_await send_error(exchange,
                        ApiError::unavailable(edge ? "edge_unavailable" : "route_unavailable",
                                              edge ? "the edge LLM (edge.llm.model_path) is not configured or not "
                                                     "available on this gateway"
                                                   : "no configured target can answer this request"),
                        &meta);
    log_request(exchange, request, meta, edge ? "edge_unavailable" : "route_unavailable", {}, 0);
    co_return;
  }
  if (meta.decision.plan.steps.empty()) {
    // A typed refusal: the budget was spent before anything could run.
    meta.overhead_us = micros_since(exchange.received_at());
    co_await send_error(exchange,
                        ApiError::gateway_timeout("deadline_exceeded",
                                                  "the request's deadline had passed before it could be routed "
                                                  "(hengshi.deadline_ms / X-Hengshi-Deadline-Ms)"),
                        &meta);
    log_request(exchange, request, meta, "deadline_exceeded", {}, 0);
    co_return;
  }
  if (exchange.under_pressure() && !answers_without_cloud(meta.decision.plan)) {
    // Over server.max_in_flight: only what the gateway answers by itself (edge intent, hand-off,
    // safe reply) uses the priority reserve; the rest is shed fast.
    meta.overhead_us = micros_since(exchange.received_at());
    co_await send_error(exchange,
                        ApiError::too_many_requests("gateway_overloaded",
                                                    "the gateway is at server.max_in_flight (" +
                                                        std::to_string(config_.server.max_in_flight) +
                                                        ") requests; retry shortly"),
                        &meta);
    log_request(exchange, request, meta, "gateway_overloaded", {}, 0);
    co_return;
  }
  co_await reply(exchange, request, meta, *policy, budget, input.prediction);
}

awaitable<void> ChatCompletions::reply(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                                       const router::RouterPolicy& policy, const Budget& budget,
                                       const edge::IntentPrediction* prediction) {
  const ClientKey* key = exchange.client_key().get();
  RequestSources canned{chain::CannedSource("hengshi-human-handoff", policy.human_message),
                        chain::CannedSource("hengshi-safe-reply", policy.pii_safe_message),
                        chain::CannedSource("hengshi-last-resort", config_.chain.last_resort.message), key};
  // Two pointers, not [&]: they fit std::function's inline buffer (three references allocated).
  chain::SourceLookup lookup = [self = this, sources = &canned](Source source) -> chain::AnswerSource* {
    switch (source) {
      case Source::edge_intent: return self->edge_intent_.get();
      case Source::edge_intent_verified: return self->edge_intent_verified_.get();
      case Source::edge_llm: return self->edge_llm_.get();
      case Source::cloud_small:
      case Source::cloud_large: {
        // A pool the key may not use is not a source for this request.
        if (sources->key && !sources->key->allows_pool(std::string(to_string(source)))) return nullptr;
        auto it = self->clouds_.find(source);
        return it == self->clouds_.end() ? nullptr : it->second.get();
      }
      case Source::human_handoff: return &sources->human;
      case Source::safe_reply: return &sources->safe;
      case Source::last_resort_reply: return &sources->last_resort;
      case Source::cache: return nullptr;  // the chain's own stage, never looked up
    }
    return nullptr;
  };
  // A pinned pool the key may not use is refused outright, as before the chain.
  if (key && meta.decision.plan.pinned && is_cloud(meta.decision.route) &&
      !key->allows_pool(std::string(to_string(meta.decision.route)))) {
    AuthMetrics::count_failure("pool_not_allowed");
    co_await send_error(exchange,
                        key_errors::pool_not_allowed(key->name, std::string(to_string(meta.decision.route))), &meta);
    log_request(exchange, request, meta, "pool_not_allowed", {}, 0);
    co_return;
  }

  chain::CacheStage cache_stage;
  prepare_cache(exchange, request, meta, cache_stage);
  ResponseWriter writer(exchange, request, config_.server.expose_figures);
  // Designated: a default-constructed client_gone, then overwritten, would allocate for nothing.
  chain::ChainRequest chain_request{.request = &request,
                                    .cache = cache_stage.cache != nullptr ? &cache_stage : nullptr,
                                    .prediction = prediction,
                                    .client_gone = exchange.client_gone(),
                                    .will_wait = [&exchange] { exchange.watch_client(); },
                                    .stream = request.stream ? &writer : nullptr,
                                    .sources = lookup};
  chain::ChainResult result;
  co_await chain_->execute(meta.decision.plan, budget, chain_request, meta, result);
  for (const HopRecord& hop : meta.hops) {
    if (hop.source == Source::edge_llm && offline_ != nullptr) {
      // The edge LLM's health: engine failures in a row take the edge out of the plans (the cloud
      // answers; it is tried again every few seconds); a full queue or a long prompt says nothing.
      if (hop.outcome == "ok"sv) {
        offline_->record_edge_success();
      } else if (hop.outcome == "decode_failed"sv || hop.outcome == "edge_llm_stopped"sv) {
        offline_->record_edge_error(hop.outcome);
      }
    }
    if (hop.source != Source::edge_intent_verified) continue;
    const std::string verdict = hop.outcome == "ok"sv         ? "yes"
                                : hop.outcome == "rejected"sv ? "no"
                                                              : "error";
    meta.decision.figures["verify_verdict"] = verdict;
    ServerMetrics::count_verification(verdict);
  }

  if (!result.answer) {
    const chain::AttemptError& error = *result.error;
    meta.overhead_us = micros_since(exchange.received_at());
    if (error.error_class == chain::ErrorClass::cancelled || exchange.client_gone().cancelled()) {
      ServerMetrics::count_disconnect(result.committed ? "streaming" : "waiting_upstream");
      exchange.force_close();
      log_request(exchange, request, meta, "client_closed", {}, 0);
      co_return;
    }
    co_await writer.write_error(error.api, &meta, error.retry_after_ms);
    log_request(exchange, request, meta, error.kind, {}, 0);
    co_return;
  }

  chain::Answer& answer = *result.answer;
  if (meta.offline && !config_.chain.offline.notice.empty()) {
    // Offline answers say so in their text, not only in the metadata.
    if (result.streamed) {
      answer.content = config_.chain.offline.notice;
    } else {
      answer.content += config_.chain.offline.notice;
    }
  }
  for (auto& [name, value] : answer.figures.items()) meta.decision.figures[name] = value;
  if (auto mean = answer.figures.find("token_mean_prob"); mean != answer.figures.end()) {
    // The edge LLM's own (uncalibrated) token-probability confidence; the router calibrates it.
    meta.decision.confidence = mean->get<double>();
  }
  const std::string pool = answer.pool.empty() ? "canned" : answer.pool;
  ServerMetrics::count_tokens(pool == "canned"sv ? "edge" : pool, answer.usage.prompt,
                              answer.usage.completion, meta.cost.value_or(0.0));
  // Overhead is everything but the source's own time, up to the answer (the chain's reading when
  // a level answered) or to now, just before serialising.
  const Clock::time_point answered_at =
      result.answered_at != Clock::time_point{} ? result.answered_at : Clock::now();
  meta.overhead_us = std::max<std::int64_t>(
      0, duration_cast<microseconds>(answered_at - exchange.received_at()).count() -
             answer.source_time.count());
  ServerMetrics::observe_overhead(static_cast<double>(meta.overhead_us) / 1e6);
  bool delivered = result.streamed ? co_await writer.finish_stream(meta, answer)
                                   : co_await writer.write_answer(meta, answer);
  if (pool == "edge"sv) {
    ServerMetrics::observe_edge(meta.decision.edge_engine == EdgeEngine::llm || answer.ttft.count() > 0 ? "llm" : "intent",
                                delivered ? "ok" : "client_closed",
                                std::chrono::duration<double>(answer.source_time).count());
  }
  if (!delivered) ServerMetrics::count_disconnect(request.stream ? "streaming" : "writing_response");
  // A cloud answer's text is in the upstream body it passed through; a stream's went out in pieces.
  const std::string answer_text =
      result.streamed || !config_.log.text ? std::string()
      : answer.content.empty()             ? chain::reply_text(answer.upstream_body)
                                           : answer.content;
  log_request(exchange, request, meta, delivered ? "ok" : "client_closed", answer.usage,
              std::chrono::duration_cast<std::chrono::microseconds>(answer.ttft).count(),
              result.streamed ? nullptr : &answer_text);
  if (delivered) {
    // After the client has its answer: the shadow copies what it needs and runs detached.
    chain::ShadowOffer shadow;
    shadow.request = &request;
    shadow.meta = &meta;
    shadow.answer = &answer;
    shadow.prediction = prediction;
    shadow.cloud_small_allowed = key == nullptr || key->allows_pool("cloud-small");
    shadow.task_label = task_label(request);
    const auto executor = co_await asio::this_coro::executor;
    shadow_->offer(executor, shadow);
  }
}

void ChatCompletions::prepare_cache(const HttpExchange& exchange, const ChatRequest& request, ResponseMeta& meta,
                                    chain::CacheStage& stage) {
  if (cache_ == nullptr) {
    meta.cache = "off";  // cache.enabled: false
    return;
  }
  auto skip = [&](std::string_view reason) {
    cache_->skipped(reason);
    meta.cache = "off";
    meta.decision.figures["cache_skipped"] = std::string(reason);
  };
  const auto& task_type = request.hengshi.task_type;
  if (!config_.cache.enabled_for(task_type)) return skip("task_type");
  if (request.hengshi.cache == false) return skip("request");
  const RequestCacheControl control = parse_cache_control(field_value(exchange.request(), http::field::cache_control));
  if (control.no_store) return skip("no-store");
  // PII never enters the cache, nor does what could not be checked for it; a hand-off is a person.
  const Reason reason = meta.decision.reason;
  if (reason == Reason::pii_pin || reason == Reason::pii_uncheckable || reason == Reason::non_text_refused ||
      reason == Reason::sensitive_signal) {
    return skip("pii_or_sensitive");
  }
  if (auto why = cache::uncacheable(request)) return skip(*why);
  const ClientKey* key = exchange.client_key().get();
  const cache::ScopeParts scope{to_string(meta.decision.route), request.model, task_type,
                                key ? std::string_view(key->cache_scope) : std::string_view("shared")};
  stage.cache = cache_;
  // A question the edge reads as likely out of scope carries that label, not its nearest intent's
  // (in_scope is unset when the intent model did not run: no label then).
  const Decision& decision = meta.decision;
  const bool out_of_scope = edge::likely_out_of_scope(decision.intent == edge::kOutOfScopeIntent,
                                                      decision.in_scope.value_or(1.0));
  stage.query =
      cache_->query(request, scope, out_of_scope ? std::string(edge::kOutOfScopeIntent) : decision.intent);
  // A question the complexity score calls hard turns on its details: another number, premise or
  // option changes the answer, and templated questions ("Select the best translation into
  // predicate logic: ...") share most of their words. Only its exact text is served from, or
  // indexed in, the cache.
  if (reason == Reason::complexity_high || reason == Reason::complexity_hard) {
    stage.query.semantic = false;
    meta.decision.figures["cache_semantic"] = "off_hard";
  }
  stage.read = !control.no_cache;
  stage.write = true;
  auto judge = pools_.find("cloud-small");
  if (config_.cache.verify_band > 0 && judge != pools_.end() && judge->second != nullptr &&
      (key == nullptr || key->allows_pool("cloud-small"))) {
    cloud::CloudPool* pool = judge->second;
    stage.verify = [pool](const std::string& question, const std::string& answer, Deadline deadline,
                          CancelToken cancel) { return confirm_cached_answer(*pool, question, answer, deadline, cancel); };
  }
  if (control.no_cache) meta.decision.figures["cache_skipped"] = "no-cache";
}

std::string ChatCompletions::task_label(const ChatRequest& request) const {
  // A label only for task types the policy knows: callers choose the string, series must stay few.
  if (request.hengshi.task_type.empty()) return "none";
  bool unknown = false;
  (void)router_.policy()->capabilities.row(request.hengshi.task_type, &unknown);
  return unknown ? "other" : request.hengshi.task_type;
}

void ChatCompletions::log_request(HttpExchange& exchange, const ChatRequest& request,
                                  const ResponseMeta& meta, const std::string& outcome,
                                  const chain::TokenCounts& usage, std::int64_t ttft_us,
                                  const std::string* answer_text) {
  // One reading of the end for the key's charge, the request's latency and the gateway's metric.
  const Clock::time_point finished_at = Clock::now();
  exchange.set_finished_at(finished_at);
  charge_key(exchange, meta, usage, finished_at);
  const std::int64_t total_us =
      duration_cast<microseconds>(finished_at - exchange.received_at()).count();
  const RequestOutcome result =
      outcome_of(meta, exchange.status(), task_label(request), static_cast<double>(total_us) / 1e6,
                 request.stream && ttft_us > 0 ? std::optional<double>(static_cast<double>(ttft_us) / 1e6)
                                               : std::nullopt,
                 usage.prompt, usage.completion, counterfactual_prices_);
  OutcomeMetrics::record(result);
  if (!log_.enabled()) return;
  const auto policy = router_.policy();
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  json record = meta.to_json();
  record["id"] = meta.request_id;
  record.erase("request_id");
  record["outcome"] = outcome;
  record["status"] = exchange.status();
  record["stream"] = request.stream;
  // Caller-chosen text: a phone number used as a session id must not reach the log.
  record["session"] = or_null(policy->pii.redact(request.hengshi.session_id));
  record["task_type"] = or_null(policy->pii.redact(request.hengshi.task_type));
  record["requested_model"] = policy->pii.redact(request.model);
  record["latency_us"] = {{"total", total_us}, {"ttft", ttft_us}};
  record["tokens"] = {{"prompt", usage.prompt}, {"completion", usage.completion}};
  record["cost_all_cloud_large"] = result.all_cloud_large_cost;
  record["entered_edge"] = result.entered_edge;
  record["versions"] = {{"policy", policy->version},
                        {"edge_intent", or_null(edge_.intent ? edge_.intent_model_id() : std::string())},
                        {"edge_llm", or_null(edge_.llm ? edge_.llm_model_id() : std::string())}};
  if (config_.log.text && !is_pii_reason(meta.decision.reason) && !meta.decision.figures.contains("pii") &&
      !meta.decision.figures.contains("non_text_parts")) {
    // What replay and the flywheel read; never for a request whose text may not leave the edge.
    record["text"] = {{"prompt", request.last_user_text()},
                      {"answer", answer_text != nullptr ? json(*answer_text) : json(nullptr)}};
  }
  log_.write(std::move(record));
}

void ChatCompletions::charge_key(const HttpExchange& exchange, const ResponseMeta& meta,
                                 const chain::TokenCounts& usage, Clock::time_point now) {
  const ClientKey* key = exchange.client_key().get();
  if (key == nullptr || key_limits_ == nullptr) return;
  const std::int64_t tokens = usage.prompt + usage.completion;
  const double cost = meta.cost.value_or(0.0);
  if (fleet_limits_ != nullptr) {
    fleet_limits_->charge(*key, tokens, cost);
  } else {
    key_limits_->charge(*key, tokens, cost, now);
  }
  AuthMetrics::charge(key->name, static_cast<long>(tokens), cost);
}

}  // namespace hengshi::server
