// GatewayHandler: the gateway's HTTP surface (DESIGN.md §4) — dispatches paths to endpoints,
// answers wrong paths/methods with OpenAI-style 404/405, and records every request in the
// HTTP metrics.
//
// Ownership: borrows the config, the pools, the edge engines, the router, the request log and the server (for readiness);
// all must outlive it. Thread-safety: handle() runs concurrently on many strands.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cloud/cloud_pool.h"
#include "core/config.h"
#include "edge/edge_engines.h"
#include "obs/request_log.h"
#include "router/router.h"
#include "server/http_server.h"

namespace hengshi::server {

class ChatCompletions;

class GatewayHandler : public RequestHandler {
 public:
  GatewayHandler(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                 const edge::EdgeEngines& edge, router::Router& router, obs::RequestLog& request_log);
  ~GatewayHandler() override;

  // Readiness follows the server: not ready while draining.
  void attach(const HttpServer* server) { server_ = server; }

  awaitable<void> handle(HttpExchange& exchange) override;
  void on_protocol_error(int status) override;

 private:
  awaitable<void> dispatch(HttpExchange& exchange, const std::string& route);

  const Config& config_;
  std::map<std::string, cloud::CloudPool*> pools_;
  const edge::EdgeEngines& edge_;
  router::Router& router_;
  const HttpServer* server_ = nullptr;
  std::unique_ptr<ChatCompletions> chat_;
};

}  // namespace hengshi::server
