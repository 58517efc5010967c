// GatewayAccess: who may use the gateway, set up for `hengshi serve` — the client keys (loaded
// when server.auth resolves to on, hot-reloaded) and the admin listener (server.admin_listen,
// its own HttpServer with AdminHandler on the same io_context, guarded by the admin token).
//
// Order of use: create() before any port opens (a bad keys file or an unset admin token refuses
// to start); start_admin() after the public listener; stop() when draining.
// Ownership: borrows the config and the router for its lifetime; owns the key store, the admin
// handler and the admin server. Must be destroyed before the io_context.
// Thread-safety: reload_keys()/poll_keys() from any thread (KeyStore serialises them).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/asio.h"
#include "core/config.h"
#include "core/result.h"
#include "router/router.h"
#include "server/admin_handler.h"
#include "server/http_server.h"
#include "server/key_store.h"

namespace hengshi::server {

class GatewayAccess {
 public:
  static Result<std::unique_ptr<GatewayAccess>> create(const ServerConfig& config,
                                                       router::Router& router);
  ~GatewayAccess();

  // Null when auth is off (loopback only).
  KeyStore* keys() { return keys_.get(); }

  // Binds the admin listener; nullopt when server.admin_listen is "".
  Result<std::optional<tcp::endpoint>> start_admin(asio::io_context& io);
  // The answer cache the admin routes act on (before start_admin; null = none).
  void use_cache(cache::AnswerCache* cache) { cache_ = cache; }
  void use_edge(edge::EdgeControl* edge) { edge_ = edge; }
  // Stops the admin listener (on SIGTERM, with the public one).
  void stop();

  // SIGHUP; and the file watcher's tick (stable-file debounce, see KeyStore::poll).
  void reload_keys(const std::string& trigger);
  void poll_keys();

 private:
  GatewayAccess(const ServerConfig& config, router::Router& router)
      : config_(config), router_(router) {}

  ServerConfig config_;
  router::Router& router_;
  std::string admin_token_;
  std::unique_ptr<KeyStore> keys_;
  edge::EdgeControl* edge_ = nullptr;
  std::unique_ptr<AdminHandler> admin_handler_;
  cache::AnswerCache* cache_ = nullptr;
  std::unique_ptr<HttpServer> admin_server_;
};

// "http://HOST:PORT" for a bound endpoint (IPv6 in brackets).
std::string url_of(const tcp::endpoint& endpoint);

}  // namespace hengshi::server
