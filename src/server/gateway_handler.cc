#include "server/gateway_handler.h"

#include <array>

#include "obs/metrics.h"
#include "server/chat_completions.h"
#include "server/server_metrics.h"

namespace hengshi::server {
namespace {

struct Endpoint {
  const char* path;
  http::verb method;
};

// The known paths; a known path with another method is a 405, an unknown path a 404.
// std::array, not a C array: GCC 12 miscompiles range-for over a C array inside a coroutine.
constexpr std::array<Endpoint, 6> kEndpoints = {{
    {"/v1/chat/completions", http::verb::post},
    {"/v1/models", http::verb::get},
    {"/healthz", http::verb::get},
    {"/readyz", http::verb::get},
    {"/metrics", http::verb::get},
    {"/admin/reload", http::verb::post},
}};

std::string_view path_of(std::string_view target) {
  auto query = target.find('?');
  return query == std::string_view::npos ? target : target.substr(0, query);
}

}  // namespace

GatewayHandler::GatewayHandler(const Config& config, std::map<std::string, cloud::CloudPool*> pools,
                               const edge::EdgeEngines& edge, router::Router& router,
                               obs::RequestLog& request_log)
    : config_(config),
      pools_(pools),
      edge_(edge),
      router_(router),
      chat_(std::make_unique<ChatCompletions>(config, std::move(pools), edge, router, request_log)) {}

GatewayHandler::~GatewayHandler() = default;

void GatewayHandler::on_protocol_error(int status) {
  ServerMetrics::count_request("protocol_error", "-", status);
}

awaitable<void> GatewayHandler::handle(HttpExchange& exchange) {
  std::string_view path = path_of(to_std(exchange.request().target()));
  std::string route = "unknown";
  for (const auto& endpoint : kEndpoints) {
    if (path == endpoint.path) route = endpoint.path;
  }
  ServerMetrics::in_flight().inc();
  co_await dispatch(exchange, route);
  ServerMetrics::in_flight().dec();
  std::string method(exchange.request().method_string());
  ServerMetrics::count_request(route, method, exchange.status());
  ServerMetrics::observe_latency(
      route, std::chrono::duration<double>(Clock::now() - exchange.received_at()).count());
}

awaitable<void> GatewayHandler::dispatch(HttpExchange& exchange, const std::string& route) {
  const auto method = exchange.request().method();
  if (route == "unknown") {
    co_await exchange.send_json(
        http::status::not_found,
        ApiError::not_found("no route for " + std::string(exchange.request().method_string()) + " " +
                            std::string(path_of(to_std(exchange.request().target()))))
            .body());
    co_return;
  }
  for (const auto& endpoint : kEndpoints) {
    if (route == endpoint.path && method != endpoint.method) {
      Response response{http::status::method_not_allowed, exchange.request().version()};
      response.set(http::field::allow, http::to_string(endpoint.method));
      response.set(http::field::content_type, "application/json");
      response.body() = ApiError::method_not_allowed(
                            std::string(exchange.request().method_string()) + " is not allowed on " +
                            route + "; use " + std::string(http::to_string(endpoint.method)))
                            .body();
      co_await exchange.send(std::move(response));
      co_return;
    }
  }

  if (route == "/v1/chat/completions") {
    co_await chat_->handle(exchange);
  } else if (route == "/healthz") {
    co_await exchange.send_json(http::status::ok, std::string(R"({"status":"ok"})"));
  } else if (route == "/readyz") {
    bool ready = server_ == nullptr || !server_->draining();
    co_await exchange.send_json(ready ? http::status::ok : http::status::service_unavailable,
                                std::string(ready ? R"({"status":"ready"})" : R"({"status":"draining"})"));
  } else if (route == "/metrics") {
    Response response{http::status::ok, exchange.request().version()};
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.body() = obs::Registry::global().render();
    co_await exchange.send(std::move(response));
  } else if (route == "/admin/reload") {
    // Policy files are small YAML/JSON: reading them inline costs less than a thread hop.
    auto reloaded = router_.reload("POST /admin/reload");
    if (reloaded) {
      std::string body = nlohmann::json{{"status", "reloaded"}, {"version", *reloaded}}.dump();
      co_await exchange.send_json(http::status::ok, std::move(body));
    } else {
      ApiError error = ApiError::invalid_request("policy_rejected",
                                                 "reload rejected, the running policy stays (" +
                                                     router_.policy()->version + "): " + reloaded.error().message);
      error.status = 422;
      co_await exchange.send_json(http::status::unprocessable_entity, error.body());
    }
  } else if (route == "/v1/models") {
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
