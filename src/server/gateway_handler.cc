#include "server/gateway_handler.h"

#include <array>

#include "core/header_field.h"
#include "core/json_text.h"
#include "server/auth_metrics.h"
#include "server/chat_completions.h"
#include "server/key_errors.h"
#include "server/request_target.h"
#include "server/server_metrics.h"

namespace hengshi::server {
namespace {

using namespace std::string_view_literals;

struct Endpoint {
  std::string_view path;  // not const char*: comparing with one runs strlen each time
  http::verb method;
};

// The known paths; a known path with another method is a 405, an unknown path a 404.
// std::array, not a C array: GCC 12 miscompiles range-for over a C array inside a coroutine.
// /metrics and /admin/* are on the admin listener only (AdminHandler): here they are 404s.
constexpr std::array<Endpoint, 4> kEndpoints = {{
    {"/v1/chat/completions", http::verb::post},
    {"/v1/models", http::verb::get},
    {"/healthz", http::verb::get},
    {"/readyz", http::verb::get},
}};

}  // namespace

GatewayHandler::GatewayHandler(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                               const edge::EdgeEngines& edge, router::Router& router,
                               obs::RequestLog& request_log)
    : config_(config),
      pools_(pools),
      edge_(edge),
      router_(router),
      chat_(
          std::make_unique<ChatCompletions>(config, std::move(pools), edge, router, request_log)) {}

GatewayHandler::~GatewayHandler() = default;

void GatewayHandler::use_keys(const KeyStore* keys) {
  keys_ = keys;
  chat_->use_key_limits(keys ? &limits_ : nullptr);
}

void GatewayHandler::use_cache(cache::AnswerCache* cache) {
  cache_ = cache;
  chat_->use_cache(cache);
}

void GatewayHandler::use_fleet_limits(cache::RedisClient* redis, int fleet_size) {
  fleet_limits_ = redis ? std::make_unique<FleetLimits>(*redis, fleet_size) : nullptr;
  chat_->use_fleet_limits(fleet_limits_.get());
}

void GatewayHandler::use_offline_mode(chain::OfflineMode* offline) {
  offline_ = offline;
  chat_->use_offline_mode(offline);
}

void GatewayHandler::stop_background() { chat_->stop_shadows(); }

GatewayHandler::KeyCheck GatewayHandler::check_key(HttpExchange& exchange, std::string_view route) {
  KeyCheck check;
  std::string_view path = path_of(to_std(exchange.request().target()));
  if (keys_ == nullptr || !path.starts_with("/v1/")) return check;
  std::string_view authorization = field_value(exchange.request(), http::field::authorization);
  std::string_view secret = bearer_token(authorization);
  check.key = secret.empty() ? nullptr : keys_->authenticate(secret, exchange.connection_memo());
  if (!check.key) {
    AuthMetrics::count_failure(secret.empty() ? "missing_key" : "invalid_key");
    // The presented key is never echoed, not even in part.
    ApiError error = key_errors::invalid_api_key(
        secret.empty() ? "missing API key: send Authorization: Bearer <key>"
                       : "incorrect API key provided");
    Response response{http::status::unauthorized, exchange.request().version()};
    response.set(http::field::content_type, "application/json");
    response.set(http::field::www_authenticate, "Bearer");
    response.body() = error.body();
    check.refusal = std::move(response);
    return check;
  }
  AuthMetrics::count_request(check.key->name);
  if (route == "/v1/chat/completions"sv && exchange.request().method() == http::verb::post) {
    if (fleet_limits_) {
      check.ask_fleet = true;
    } else {
      // The request's arrival is the moment it asks: no clock reading of its own.
      refuse_over_limit(check, limits_.admit(*check.key, exchange.received_at()),
                        exchange.request().version());
    }
  }
  return check;
}

void GatewayHandler::refuse_over_limit(KeyCheck& check, const Admission& admission,
                                       unsigned version) {
  if (admission.allowed) return;
  AuthMetrics::count_rate_limited(check.key->name, admission.limit);
  ApiError error = admission.limit == "budget"
                       ? key_errors::insufficient_quota(check.key->name)
                       : key_errors::rate_limited(check.key->name, admission.limit);
  Response response{http::status::too_many_requests, version};
  response.set(http::field::content_type, "application/json");
  if (admission.retry_after_s > 0) {
    response.set(http::field::retry_after, std::to_string(admission.retry_after_s));
  }
  response.body() = error.body();
  check.refusal = std::move(response);
}

void GatewayHandler::on_protocol_error(int status) {
  ServerMetrics::count_request("protocol_error", "-", status);
}

awaitable<void> GatewayHandler::handle(HttpExchange& exchange) {
  std::string_view path = path_of(to_std(exchange.request().target()));
  std::string_view route = "unknown";
  for (const auto& endpoint : kEndpoints) {
    if (path == endpoint.path) route = endpoint.path;
  }
  // The key check and the usual dispatch are plain calls, not coroutines of their own: each
  // nested coroutine is a frame allocation and a trip through Asio's awaitable machinery, and
  // they suspend only to ask a fleet's limits or to send a refusal.
  KeyCheck check = check_key(exchange, route);
  if (check.ask_fleet) {
    const Admission admission = co_await fleet_limits_->admit(*check.key);
    refuse_over_limit(check, admission, exchange.request().version());
  }
  if (check.refusal) {
    co_await exchange.send(std::move(*check.refusal));
  } else {
    if (check.key) exchange.set_client_key(std::move(check.key));
    if (route == "/v1/chat/completions"sv && exchange.request().method() == http::verb::post) {
      co_await chat_->handle(exchange);
    } else {
      co_await dispatch(exchange, route);
    }
  }
  ServerMetrics::count_request(route, to_std(exchange.request().method_string()),
                               exchange.status());
  ServerMetrics::observe_latency(
      route, std::chrono::duration<double>(exchange.finished_at().value_or(Clock::now()) -
                                           exchange.received_at())
                 .count());
}

awaitable<void> GatewayHandler::dispatch(HttpExchange& exchange, std::string_view route) {
  const auto method = exchange.request().method();
  if (route == "unknown"sv) {
    co_await exchange.send_json(
        http::status::not_found,
        ApiError::not_found("no route for " + std::string(exchange.request().method_string()) +
                            " " + std::string(path_of(to_std(exchange.request().target()))))
            .body());
    co_return;
  }
  for (const auto& endpoint : kEndpoints) {
    if (route == endpoint.path && method != endpoint.method) {
      Response response{http::status::method_not_allowed, exchange.request().version()};
      response.set(http::field::allow, http::to_string(endpoint.method));
      response.set(http::field::content_type, "application/json");
      response.body() =
          ApiError::method_not_allowed(std::string(exchange.request().method_string()) +
                                       " is not allowed on " + std::string(route) + "; use " +
                                       std::string(http::to_string(endpoint.method)))
              .body();
      co_await exchange.send(std::move(response));
      co_return;
    }
  }

  if (route == "/v1/chat/completions"sv) {
    co_await chat_->handle(exchange);
  } else if (route == "/healthz"sv) {
    co_await exchange.send_json(http::status::ok, std::string(R"({"status":"ok"})"));
  } else if (route == "/readyz"sv) {
    // Offline or without its edge the gateway still answers (degraded), so it stays ready; the
    // detail tells the operator which way it is degraded.
    bool ready = server_ == nullptr || !server_->draining();
    nlohmann::json status = {{"status", ready ? "ready" : "draining"}};
    if (offline_ != nullptr) status["chain"] = offline_->to_json();
    if (cache_ != nullptr) {
      // A down shared tier degrades the cache to this instance; the gateway still answers.
      const auto shared = cache_->shared_tier_up();
      status["cache"] = {{"enabled", true},
                         {"redis", shared ? nlohmann::json(*shared ? "up" : "down") : nlohmann::json("off")}};
    }
    // Which edge LLM versions serve per task type, and the last promotion and rollback.
    if (edge_.control) status["edge_llm"] = edge_.control->status(/*brief=*/true);
    std::string body = dump_text(status);
    co_await exchange.send_json(ready ? http::status::ok : http::status::service_unavailable, std::move(body));
  } else if (route == "/v1/models"sv) {
    nlohmann::json data = nlohmann::json::array();
    std::vector<std::string> ids;
    if (edge_.intent || edge_.llm) ids.push_back("edge");
    if (edge_.intent) ids.push_back("edge-intent");
    if (edge_.llm) ids.push_back("edge-llm");
    for (const auto& pool : config_.pools) ids.push_back(pool.name);
    for (const auto& id : ids) {
      data.push_back({{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "hengshi"}});
    }
    // Built outside the co_await: GCC 12 rejects array temporaries inside a co_await expression.
    std::string body = nlohmann::json{{"object", "list"}, {"data", data}}.dump();
    co_await exchange.send_json(http::status::ok, std::move(body));
  }
}

}  // namespace hengshi::server
