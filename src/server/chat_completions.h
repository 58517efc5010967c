// ChatCompletions: POST /v1/chat/completions — validate, decide the route (router::decide),
// answer from the edge, a cloud pool, or a configured reply (human hand-off, PII safe message),
// as JSON or SSE with the "hengshi" metadata and X-Hengshi-* headers, and write the
// request log record.
//
// Ownership: borrows config, pools, edge engines, router and log. Thread-safety: handle() is re-entrant.
#pragma once

#include <map>
#include <string>

#include "cloud/cloud_pool.h"
#include "core/chat_request.h"
#include "core/config.h"
#include "core/response_meta.h"
#include "edge/edge_engines.h"
#include "obs/request_log.h"
#include "router/router.h"
#include "server/http_exchange.h"
#include "server/rate_limiter.h"

namespace hengshi::server {

class ChatCompletions {
 public:
  ChatCompletions(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                  const edge::EdgeEngines& edge, router::Router& router, obs::RequestLog& request_log)
      : config_(config), pools_(std::move(pools)), edge_(edge), router_(router), log_(request_log) {
    for (const auto& [name, pool] : pools_) pool_names_.push_back(name);
  }

  awaitable<void> handle(HttpExchange& exchange);
  // Client keys on: the exchange's key is checked for the model and pool, its session ids are
  // scoped by key name, and each answer's tokens and cost are charged to `limits`.
  void use_key_limits(KeyLimits* limits) { key_limits_ = limits; }

 private:
  awaitable<void> respond_json(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                               cloud::CloudPool& pool, Deadline deadline);
  awaitable<void> respond_stream(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                                 cloud::CloudPool& pool, Deadline deadline);
  // Edge answers (chat_completions_edge.cc).
  awaitable<void> respond_edge_intent(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                                      const edge::IntentPrediction& prediction, Deadline deadline);
  // middle_band_verify: asks cloud-small whether the edge's answer answers the question; true =
  // serve it. Records the verdict, its cost and the attempt in `meta`.
  awaitable<bool> verify_edge_answer(HttpExchange& exchange, const ChatRequest& request, ResponseMeta& meta,
                                     const edge::IntentPrediction& prediction, cloud::CloudPool& pool,
                                     Deadline deadline);
  awaitable<void> respond_edge_llm(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                                   Deadline deadline);
  // Route human (hand-off message) or refuse (PII safe message, or 504 when the deadline passed).
  awaitable<void> respond_configured(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                                     const router::RouterPolicy& policy);
  // A whole answer the gateway has in hand, as JSON or as an SSE stream.
  awaitable<bool> send_answer(HttpExchange& exchange, const ChatRequest& request, ResponseMeta& meta,
                              const std::string& content, const std::string& finish_reason,
                              const cloud::Usage& usage);

  awaitable<bool> start_stream(HttpExchange& exchange, const ResponseMeta& meta);
  // Writes the final metadata chunk and [DONE] and ends the stream; false when the client left.
  awaitable<bool> finish_stream_with_meta(HttpExchange& exchange, const ResponseMeta& meta);
  // Answers from a cloud pool, as JSON or SSE.
  awaitable<void> respond_cloud(HttpExchange& exchange, ChatRequest& request, ResponseMeta& meta,
                                Deadline deadline);
  awaitable<void> send_error(HttpExchange& exchange, const ApiError& error, const ResponseMeta* meta);
  // The metadata as the client sees it (figures only with server.expose_figures).
  nlohmann::json client_meta(const ResponseMeta& meta) const {
    return meta.to_json(config_.server.expose_figures);
  }
  void log_request(const HttpExchange& exchange, const ChatRequest& request, const ResponseMeta& meta,
                   const std::string& outcome, const cloud::Usage& usage, std::int64_t ttft_us);
  // Charges the request's key (if any) with its tokens and cost; called from log_request, the
  // one place every path ends.
  void charge_key(const HttpExchange& exchange, const ResponseMeta& meta, const cloud::Usage& usage);

  const Config& config_;
  std::map<std::string, cloud::CloudPool*> pools_;
  const edge::EdgeEngines& edge_;
  router::Router& router_;
  obs::RequestLog& log_;
  std::vector<std::string> pool_names_;
  KeyLimits* key_limits_ = nullptr;
};

// Reads X-Hengshi-Task-Type / -Session / -Deadline-Ms into the extension (body fields win).
Result<Ok, ApiError> apply_extension_headers(const http::request<http::string_body>& request,
                                             HengshiExtension& extension);

std::string new_request_id();

// What `usage` cost on `upstream` of `pool`, at the member's configured prices.
double cost_of(const cloud::CloudPool& pool, const std::string& upstream, const cloud::Usage& usage);

}  // namespace hengshi::server
