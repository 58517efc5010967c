// AdminHandler: the admin surface on its own listener (server.admin_listen, loopback by default),
// apart from the public port, after Envoy's admin interface: GET /metrics (Prometheus),
// POST /admin/reload (routing policy and client keys), GET /admin/stats, and the answer cache's
// POST /admin/cache/invalidate ({"tags": [...]} or {"all": true} → {"removed": n}) and
// GET /admin/cache/stats; and the edge LLM's lifecycle: GET /admin/edge (what serves, the last
// promotion and rollback with the gate's figures), POST /admin/edge/promote
// ({"dir", "task"?, "data"?, "by"?}) and POST /admin/edge/rollback ({"by"?}).
//
// Every request is checked before it is dispatched:
//   - Host (port ignored) must be in server.admin_allowed_hosts, and an Origin header, when
//     present, must name one of those hosts: a browser page on another site (CSRF) or a DNS name
//     rebound to 127.0.0.1 gets 403;
//   - with an admin token configured, `Authorization: Bearer <token>` (compared in constant
//     time), else 401.
//
// Ownership: borrows the router and the key store (may be null); both must outlive it.
// Thread-safety: handle() runs concurrently on many strands; the token is immutable.
#pragma once

#include <string>
#include <vector>

#include "cache/answer_cache.h"
#include "edge/edge_control.h"
#include "router/router.h"
#include "server/http_server.h"
#include "server/key_store.h"

namespace hengshi::server {

class AdminHandler : public RequestHandler {
 public:
  // `token` "" = no token needed (the config allows that only on a loopback admin listener).
  AdminHandler(std::vector<std::string> allowed_hosts, std::string token, router::Router& router,
               KeyStore* keys);

  awaitable<void> handle(HttpExchange& exchange) override;
  void on_protocol_error(int status) override;
  // The answer cache the cache routes act on (null: they answer 404 cache_disabled).
  void use_cache(cache::AnswerCache* cache) { cache_ = cache; }
  // The edge LLM's lifecycle the /admin/edge routes act on (null: 404 edge_llm_disabled).
  void use_edge(edge::EdgeControl* edge) { edge_ = edge; }

 private:
  awaitable<void> dispatch(HttpExchange& exchange, const std::string& path);
  awaitable<void> reload(HttpExchange& exchange);
  awaitable<void> invalidate_cache(HttpExchange& exchange);
  awaitable<void> change_edge(HttpExchange& exchange, bool promote);
  awaitable<void> refuse_no_edge(HttpExchange& exchange);

  std::vector<std::string> allowed_hosts_;
  std::string token_;
  router::Router& router_;
  KeyStore* keys_;
  cache::AnswerCache* cache_ = nullptr;
  edge::EdgeControl* edge_ = nullptr;
};

// The host part of a Host header or an Origin ("http://h:1" → "h", "[::1]:8081" → "[::1]"),
// lower-cased; "" when it cannot be read.
std::string host_without_port(std::string_view value, bool is_origin);

}  // namespace hengshi::server
