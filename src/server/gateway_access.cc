#include "server/gateway_access.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace hengshi::server {

Result<std::unique_ptr<GatewayAccess>> GatewayAccess::create(const ServerConfig& config,
                                                             router::Router& router) {
  std::unique_ptr<GatewayAccess> access(new GatewayAccess(config, router));
  if (config.auth_enabled()) {
    auto keys = KeyStore::open(config.keys_file);
    if (!keys) return keys.error();
    access->keys_ = std::move(*keys);
    spdlog::info("client keys: {} from {} (Authorization: Bearer)",
                 access->keys_->keys()->keys.size(), config.keys_file);
  } else {
    spdlog::warn("client keys are off (server.auth {}): anyone who can reach {} may use it",
                 config.auth, config.listen);
  }
  if (!config.admin_token_env.empty()) {
    const char* token = std::getenv(config.admin_token_env.c_str());
    if (token == nullptr || *token == '\0') {
      return Error{"admin_token_missing", "server.admin_token_env names " + config.admin_token_env +
                                              ", which is unset or empty"};
    }
    access->admin_token_ = token;
  }
  return access;
}

GatewayAccess::~GatewayAccess() = default;

Result<std::optional<tcp::endpoint>> GatewayAccess::start_admin(asio::io_context& io) {
  if (config_.admin_listen.empty()) return std::optional<tcp::endpoint>();
  admin_handler_ = std::make_unique<AdminHandler>(config_.admin_allowed_hosts, admin_token_,
                                                  router_, keys_.get());
  admin_handler_->use_cache(cache_);
  admin_handler_->use_edge(edge_);
  ServerConfig admin_config = config_;
  admin_config.listen = config_.admin_listen;
  admin_server_ = std::make_unique<HttpServer>(io, admin_config, *admin_handler_);
  auto endpoint = admin_server_->start();
  if (!endpoint) {
    return Error{endpoint.error().code, "server.admin_listen: " + endpoint.error().message};
  }
  if (admin_token_.empty()) {
    spdlog::warn(
        "admin listener {} has no token (server.admin_token_env): loopback clients may use it",
        url_of(*endpoint));
  }
  return std::optional<tcp::endpoint>(*endpoint);
}

void GatewayAccess::stop() {
  // Admin requests are short: once they finish (or the drain timeout passes), close everything so
  // the io_context can run out of work.
  if (admin_server_) admin_server_->drain([this](bool) { admin_server_->close_all(); });
}

void GatewayAccess::reload_keys(const std::string& trigger) {
  if (keys_) (void)keys_->reload(trigger);
}

void GatewayAccess::poll_keys() {
  if (keys_) keys_->poll();
}

std::string url_of(const tcp::endpoint& endpoint) {
  std::string host = endpoint.address().to_string();
  if (endpoint.address().is_v6()) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(endpoint.port());
}

}  // namespace hengshi::server
