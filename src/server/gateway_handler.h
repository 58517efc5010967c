// GatewayHandler: the gateway's public HTTP surface (DESIGN.md §4) — authenticates /v1/* with
// the client keys when auth is on (401 invalid_api_key, 429 for a key's limits), dispatches paths
// to endpoints, answers wrong paths/methods with OpenAI-style 404/405, and records every request
// in the HTTP metrics. /healthz and /readyz stay open for load balancers; /metrics and /admin/*
// are not here (AdminHandler, on its own listener).
//
// Ownership: borrows the config, the pools, the edge engines, the router, the request log, the
// server (for readiness) and the key store; all must outlive it. Owns the per-key limits.
// Thread-safety: handle() runs concurrently on many strands.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cache/answer_cache.h"
#include "chain/offline_mode.h"
#include "cloud/cloud_pool.h"
#include "core/config.h"
#include "edge/edge_engines.h"
#include "obs/request_log.h"
#include "router/router.h"
#include "server/fleet_limits.h"
#include "server/http_server.h"
#include "server/key_store.h"
#include "server/rate_limiter.h"

namespace hengshi::server {

class ChatCompletions;

class GatewayHandler : public RequestHandler {
 public:
  GatewayHandler(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                 const edge::EdgeEngines& edge, router::Router& router,
                 obs::RequestLog& request_log);
  ~GatewayHandler() override;

  // Readiness follows the server: not ready while draining.
  void attach(const HttpServer* server) { server_ = server; }
  // Client keys: every /v1/* request needs `Authorization: Bearer <key>` of one of them. Null
  // (the default) = auth off, which the config allows only on a loopback listener.
  void use_keys(const KeyStore* keys);
  // Offline mode (chain/offline_mode.h): plans follow it, /readyz shows it. Null = off.
  void use_offline_mode(chain::OfflineMode* offline);
  // The answer cache (src/cache/): chat completions read and fill it, /readyz shows its shared
  // tier. Null = off.
  void use_cache(cache::AnswerCache* cache);
  // Key limits across a fleet through the cache's Redis (cache.redis); without, per instance.
  void use_fleet_limits(cache::RedisClient* redis, int fleet_size);
  // Shutdown: stops the work the gateway does after its answers (shadow inference), so it
  // never keeps the io_context waiting. Call before draining.
  void stop_background();

  awaitable<void> handle(HttpExchange& exchange) override;
  void on_protocol_error(int status) override;

 private:
  // What the client-key check concludes, without waiting: a refusal to send (401/429), the key
  // the request goes on with (null when auth is off or the path is open), or that the fleet's
  // limits must be asked first (ask_fleet; then refuse_over_limit with their answer).
  struct KeyCheck {
    std::optional<Response> refusal;
    std::shared_ptr<const ClientKey> key;
    bool ask_fleet = false;
  };
  KeyCheck check_key(HttpExchange& exchange, std::string_view route);
  // Sets check.refusal (a 429) when the admission says no.
  static void refuse_over_limit(KeyCheck& check, const Admission& admission, unsigned version);
  // The endpoints other than POST /v1/chat/completions, and the 404s and 405s.
  awaitable<void> dispatch(HttpExchange& exchange, std::string_view route);

  const Config& config_;
  std::map<std::string, cloud::CloudPool*> pools_;
  const edge::EdgeEngines& edge_;
  router::Router& router_;
  const HttpServer* server_ = nullptr;
  const KeyStore* keys_ = nullptr;
  chain::OfflineMode* offline_ = nullptr;
  cache::AnswerCache* cache_ = nullptr;
  std::unique_ptr<FleetLimits> fleet_limits_;
  KeyLimits limits_;
  std::unique_ptr<ChatCompletions> chat_;
};

}  // namespace hengshi::server
