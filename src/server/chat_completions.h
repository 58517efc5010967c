// ChatCompletions: POST /v1/chat/completions, the HTTP side only — parse and validate, build the
// Budget once, decide (router::decide gives the route and its plan), execute the plan
// (chain::Chain owns every attempt, retry and fallback), and hand the outcome to the one
// ResponseWriter; then the request log record, the metrics and the key's charge.
//
// Ownership: borrows config, pools, edge engines, router and log. Thread-safety: handle() is re-entrant.
#pragma once

#include <map>
#include <string>

#include "chain/chain.h"
#include "chain/offline_mode.h"
#include "chain/shadow.h"
#include "chain/sources.h"
#include "cloud/cloud_pool.h"
#include "core/budget.h"
#include "core/chat_request.h"
#include "core/config.h"
#include "core/response_meta.h"
#include "edge/edge_engines.h"
#include "obs/request_log.h"
#include "router/router.h"
#include "server/http_exchange.h"
#include "server/fleet_limits.h"
#include "server/rate_limiter.h"
#include "server/request_outcome.h"

namespace hengshi::server {

class ChatCompletions {
 public:
  ChatCompletions(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                  const edge::EdgeEngines& edge, router::Router& router, obs::RequestLog& request_log);
  ~ChatCompletions();

  awaitable<void> handle(HttpExchange& exchange);
  // Client keys on: the exchange's key is checked for the model and pool, its session ids are
  // scoped by key name, and each answer's tokens and cost are charged to `limits`.
  void use_key_limits(KeyLimits* limits) { key_limits_ = limits; }
  void use_fleet_limits(FleetLimits* limits) { fleet_limits_ = limits; }
  // Offline mode (chain/offline_mode.h): read for every plan, fed by every cloud attempt. Null = off.
  void use_offline_mode(chain::OfflineMode* offline) { offline_ = offline; }
  // The answer cache (src/cache/); null = none. Must outlive the handler.
  void use_cache(cache::AnswerCache* cache) { cache_ = cache; }
  // Shutdown: new shadow inferences become no-ops and those in flight are cancelled, so they
  // never keep the io_context (and the drain) waiting.
  void stop_shadows();

 private:
  // The sources a plan step names, for one request (canned replies come from its policy snapshot).
  struct RequestSources;
  awaitable<void> reply(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                        const router::RouterPolicy& policy, const Budget& budget,
                        const edge::IntentPrediction* prediction);
  awaitable<void> send_error(HttpExchange& exchange, const ApiError& error, const ResponseMeta* meta);
  // What the cache may do for this request (read, write, neither) and its query.
  void prepare_cache(const HttpExchange& exchange, const ChatRequest& request, ResponseMeta& meta,
                     chain::CacheStage& stage);
  // The request's task type as a metric label: the policy's own names, "other" or "none".
  std::string task_label(const ChatRequest& request) const;
  // The one place every path ends: the request's metrics (RequestOutcome), its key's charge and
  // its log line, at one reading of the clock it leaves on the exchange (finished_at()).
  // `answer_text`: the answer, for the log's opt-in text (null: none or streamed).
  void log_request(HttpExchange& exchange, const ChatRequest& request, const ResponseMeta& meta,
                   const std::string& outcome, const chain::TokenCounts& usage,
                   std::int64_t ttft_us, const std::string* answer_text = nullptr);
  // Charges the request's key (if any) with its tokens and cost; called from log_request, the
  // one place every path ends, at `now`.
  void charge_key(const HttpExchange& exchange, const ResponseMeta& meta,
                  const chain::TokenCounts& usage, Clock::time_point now);

  const Config& config_;
  std::map<std::string, cloud::CloudPool*> pools_;
  const edge::EdgeEngines& edge_;
  router::Router& router_;
  obs::RequestLog& log_;
  std::vector<std::string> pool_names_;
  TokenPrices counterfactual_prices_;  // cloud-large's, for the all-cloud counterfactual
  KeyLimits* key_limits_ = nullptr;
  FleetLimits* fleet_limits_ = nullptr;  // when set, it counts instead of key_limits_
  chain::OfflineMode* offline_ = nullptr;
  cache::AnswerCache* cache_ = nullptr;
  // Sources that live as long as the gateway (the canned ones are per request).
  std::unique_ptr<chain::EdgeIntentSource> edge_intent_;
  std::unique_ptr<chain::EdgeIntentSource> edge_intent_verified_;
  std::unique_ptr<chain::EdgeLlmSource> edge_llm_;
  std::map<Source, std::unique_ptr<chain::CloudSource>> clouds_;
  std::unique_ptr<chain::Chain> chain_;
  // Shadow inference (chain.shadow): the other path, run after the answer was delivered.
  std::unique_ptr<chain::ShadowRunner> shadow_;
};

// Reads X-Hengshi-Task-Type / -Session / -Deadline-Ms into the extension (body fields win).
Result<Ok, ApiError> apply_extension_headers(const http::request<http::string_body>& request,
                                             HengshiExtension& extension);

std::string new_request_id();


}  // namespace hengshi::server
