#include "server/admin_handler.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>

#include "core/json_text.h"
#include "obs/metrics.h"
#include "server/auth_metrics.h"
#include "server/dashboard_page.h"
#include "server/request_target.h"
#include "server/server_metrics.h"
#include "server/traffic_stats.h"

namespace hengshi::server {
namespace {

// Every admin route, with its method: what the request metrics name (anything else counts as
// admin_unknown) and what a wrong method gets 405 for.
struct AdminRoute {
  std::string_view path;
  http::verb method;
};
constexpr AdminRoute kAdminRoutes[] = {
    {"/", http::verb::get},
    {"/metrics", http::verb::get},
    {"/admin/reload", http::verb::post},
    {"/admin/stats", http::verb::get},
    {"/admin/cache/invalidate", http::verb::post},
    {"/admin/cache/stats", http::verb::get},
    {"/admin/edge", http::verb::get},
    {"/admin/edge/promote", http::verb::post},
    {"/admin/edge/rollback", http::verb::post},
};

bool known_route(std::string_view path) {
  for (const auto& route : kAdminRoutes) {
    if (route.path == path) return true;
  }
  return false;
}

int status_of(const std::string& code) {
  if (code == "request_invalid") return 400;
  if (code == "change_in_progress" || code == "no_previous_version" || code == "history_not_configured") return 409;
  if (code == "io_error") return 500;
  return 422;  // the gate refused it, or the candidate cannot load
}

bool same_secret(std::string_view presented, const std::string& expected) {
  // Hash both to a fixed length so the comparison time depends on neither length nor content.
  const Sha256 a = sha256(presented);
  const Sha256 b = sha256(expected);
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

std::string host_without_port(std::string_view value, bool is_origin) {
  if (is_origin) {
    auto scheme = value.find("://");
    if (scheme == std::string_view::npos) return {};
    value.remove_prefix(scheme + 3);
    auto slash = value.find('/');
    if (slash != std::string_view::npos) value = value.substr(0, slash);
  }
  std::string host;
  if (!value.empty() && value.front() == '[') {
    auto close = value.find(']');
    if (close == std::string_view::npos) return {};
    host = std::string(value.substr(0, close + 1));
  } else {
    host = std::string(value.substr(0, value.find(':')));
  }
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return host;
}

AdminHandler::AdminHandler(std::vector<std::string> allowed_hosts, std::string token,
                           router::Router& router, KeyStore* keys)
    : allowed_hosts_(std::move(allowed_hosts)),
      token_(std::move(token)),
      router_(router),
      keys_(keys) {
  for (auto& host : allowed_hosts_) {
    for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
}

void AdminHandler::on_protocol_error(int status) {
  ServerMetrics::count_request("admin_protocol_error", "-", status);
}

awaitable<void> AdminHandler::handle(HttpExchange& exchange) {
  const auto& request = exchange.request();
  const std::string path(path_of(to_std(request.target())));
  auto allowed = [&](const std::string& host) {
    return !host.empty() &&
           std::find(allowed_hosts_.begin(), allowed_hosts_.end(), host) != allowed_hosts_.end();
  };
  std::string refusal;
  if (!allowed(host_without_port(to_std(request[http::field::host]), false))) {
    refusal = "admin_host";
  } else if (auto origin = request.find(http::field::origin);
             origin != request.end() &&
             !allowed(host_without_port(to_std(origin->value()), true))) {
    refusal = "admin_origin";
  }
  if (!refusal.empty()) {
    AuthMetrics::count_failure(refusal);
    const std::string what = refusal == "admin_host" ? "Host" : "Origin";
    ApiError error{403,
                   "permission_error",
                   "forbidden",
                   what + " is not an allowed admin host (server.admin_allowed_hosts)",
                   {}};
    std::string body = error.body();
    co_await exchange.send_json(http::status::forbidden, std::move(body));
  } else if (!token_.empty() && !(path == "/" && request.method() == http::verb::get) &&
             !same_secret(bearer_token(to_std(request[http::field::authorization])), token_)) {
    // The dashboard page holds no data (it asks for the token to read /admin/stats): served
    // without the token, behind the same Host and Origin checks.
    AuthMetrics::count_failure("admin_token");
    ApiError error{
        401,
        "invalid_request_error",
        "invalid_admin_token",
        "admin requests need Authorization: Bearer <admin token> (server.admin_token_env)",
        {}};
    std::string body = error.body();
    co_await exchange.send_json(http::status::unauthorized, std::move(body));
  } else {
    co_await dispatch(exchange, path);
  }
  const std::string route = known_route(path) ? path : "admin_unknown";
  ServerMetrics::count_request(route, to_std(request.method_string()), exchange.status());
}

awaitable<void> AdminHandler::dispatch(HttpExchange& exchange, const std::string& path) {
  const auto method = exchange.request().method();
  if (path == "/" && method == http::verb::get) {
    Response response{http::status::ok, exchange.request().version()};
    response.set(http::field::content_type, "text/html; charset=utf-8");
    response.set(http::field::cache_control, "no-store");
    // The page runs only its own inlined scripts and talks only to this listener.
    response.set("Content-Security-Policy",
                 "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'");
    response.body() = std::string(dashboard_page());
    co_await exchange.send(std::move(response));
  } else if (path == "/metrics" && method == http::verb::get) {
    Response response{http::status::ok, exchange.request().version()};
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
    response.body() = obs::Registry::global().render();
    co_await exchange.send(std::move(response));
  } else if (path == "/admin/reload" && method == http::verb::post) {
    co_await reload(exchange);
  } else if (path == "/admin/cache/invalidate" && method == http::verb::post) {
    co_await invalidate_cache(exchange);
  } else if ((path == "/admin/cache/stats" || path == "/admin/stats") && method == http::verb::get) {
    nlohmann::json stats = cache_ ? cache_->stats() : nlohmann::json({{"enabled", false}});
    if (path == "/admin/stats") {
      nlohmann::json traffic = traffic_stats(obs::Registry::global());
      traffic["cache"]["store"] = std::move(stats);
      stats = std::move(traffic);
    }
    std::string body = dump_text(stats);
    co_await exchange.send_json(http::status::ok, std::move(body));
  } else if (path == "/admin/edge" && method == http::verb::get) {
    if (edge_ == nullptr) {
      co_await refuse_no_edge(exchange);
      co_return;
    }
    std::string body = dump_text(edge_->status(false));
    co_await exchange.send_json(http::status::ok, std::move(body));
  } else if ((path == "/admin/edge/promote" || path == "/admin/edge/rollback") && method == http::verb::post) {
    co_await change_edge(exchange, path == "/admin/edge/promote");
  } else if (known_route(path)) {
    std::string body = ApiError::method_not_allowed("wrong method for " + path).body();
    co_await exchange.send_json(http::status::method_not_allowed, std::move(body));
  } else {
    std::string body = ApiError::not_found("no admin route for " + path).body();
    co_await exchange.send_json(http::status::not_found, std::move(body));
  }
}

awaitable<void> AdminHandler::reload(HttpExchange& exchange) {
  // The policy (YAML, thresholds, RE2 patterns) is parsed on the router's reload thread; the
  // keys file is a short list read inline.
  auto policy = co_await router_.reload_async("POST /admin/reload");
  nlohmann::json body = {{"status", "reloaded"}};
  std::vector<std::string> errors;
  if (policy) {
    body["version"] = *policy;
  } else {
    errors.push_back("policy: reload rejected, the running policy stays (" +
                     router_.policy()->version + "): " + policy.error().message);
  }
  if (keys_) {
    auto keys = keys_->reload("POST /admin/reload");
    if (keys) {
      body["keys"] = *keys;
    } else {
      errors.push_back("keys: reload rejected, the running keys stay: " + keys.error().message);
    }
  }
  if (errors.empty()) {
    std::string text = dump_text(body);
    co_await exchange.send_json(http::status::ok, std::move(text));
    co_return;
  }
  std::string message;
  for (const auto& e : errors) message += (message.empty() ? "" : "; ") + e;
  ApiError error = ApiError::invalid_request(policy ? "keys_rejected" : "policy_rejected", message);
  error.status = 422;
  std::string text = error.body();
  co_await exchange.send_json(http::status::unprocessable_entity, std::move(text));
}

awaitable<void> AdminHandler::refuse_no_edge(HttpExchange& exchange) {
  ApiError error = ApiError::not_found("no edge LLM serves here (edge.llm.model_path)");
  error.code = "edge_llm_disabled";
  std::string body = error.body();
  co_await exchange.send_json(http::status::not_found, std::move(body));
}

awaitable<void> AdminHandler::change_edge(HttpExchange& exchange, bool promote) {
  if (edge_ == nullptr) {
    co_await refuse_no_edge(exchange);
    co_return;
  }
  const std::string& text = exchange.request().body();
  const nlohmann::json request = text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text, nullptr, false);
  auto field = [&request](const char* name) {
    return request.contains(name) && request[name].is_string() ? request[name].get<std::string>() : std::string();
  };
  std::string problem;
  if (!request.is_object()) {
    problem = "the body must be a JSON object";
  } else {
    for (const auto& [key, value] : request.items()) {
      const bool allowed = key == "by" || (promote && (key == "dir" || key == "task" || key == "data"));
      if (!allowed) problem = "unknown field " + key;
      else if (!value.is_string()) problem = key + " must be a string";
      if (!problem.empty()) break;
    }
    if (problem.empty() && promote && field("dir").empty()) problem = "dir is missing: the finetune directory to promote";
  }
  if (!problem.empty()) {
    std::string body = ApiError::invalid_request("request_invalid", problem).body();
    co_await exchange.send_json(http::status::bad_request, std::move(body));
    co_return;
  }
  std::string by = field("by");
  if (by.empty()) by = "admin@" + exchange.peer_address();
  edge::EdgeOutcome outcome;
  if (promote) {
    edge::PromoteRequest promotion{field("dir"), field("task"), field("data"), by};
    outcome = co_await edge_->promote(std::move(promotion));
  } else {
    outcome = co_await edge_->rollback(std::move(by));
  }
  if (outcome.took()) {
    nlohmann::json body = {{"status", promote ? "promoted" : "rolled_back"}, {"entry", outcome.report}};
    if (!outcome.message.empty()) body["warning"] = outcome.message;
    std::string text_body = dump_text(body);
    co_await exchange.send_json(http::status::ok, std::move(text_body));
    co_return;
  }
  const int status = status_of(outcome.code);
  ApiError error = ApiError::invalid_request(outcome.code, outcome.message);
  error.status = status;
  nlohmann::json body = nlohmann::json::parse(error.body(), nullptr, false);
  if (!outcome.report.is_null()) body["entry"] = outcome.report;  // the gate's table, for the operator
  std::string text_body = dump_text(body);
  co_await exchange.send_json(static_cast<http::status>(status), std::move(text_body));
}

awaitable<void> AdminHandler::invalidate_cache(HttpExchange& exchange) {
  auto refuse = [](std::string code, std::string message) {
    ApiError error = ApiError::invalid_request(std::move(code), std::move(message));
    return error.body();
  };
  if (cache_ == nullptr) {
    ApiError error = ApiError::not_found("the answer cache is off (cache.enabled)");
    error.code = "cache_disabled";
    std::string body = error.body();
    co_await exchange.send_json(http::status::not_found, std::move(body));
    co_return;
  }
  const nlohmann::json request = nlohmann::json::parse(exchange.request().body(), nullptr, false);
  std::string problem;
  std::vector<std::string> tags;
  bool all = false;
  if (!request.is_object()) {
    problem = "the body must be a JSON object: {\"tags\": [...]} or {\"all\": true}";
  } else if (request.contains("all")) {
    if (!request["all"].is_boolean() || !request["all"].get<bool>() || request.contains("tags")) {
      problem = "\"all\" must be true, alone";
    }
    all = problem.empty();
  } else if (!request.contains("tags") || !request["tags"].is_array() || request["tags"].empty() ||
             request["tags"].size() > 1000) {
    problem = "\"tags\" must be a list of 1 to 1000 tags";
  } else {
    for (const auto& tag : request["tags"]) {
      if (!tag.is_string() || tag.get_ref<const std::string&>().empty()) {
        problem = "every tag must be a non-empty string";
        break;
      }
      tags.push_back(tag.get<std::string>());
    }
  }
  if (!problem.empty()) {
    std::string body = refuse("invalid_value", problem);
    co_await exchange.send_json(http::status::bad_request, std::move(body));
    co_return;
  }
  const std::size_t removed = all ? cache_->invalidate_all() : cache_->invalidate(tags);
  nlohmann::json body = {{"removed", removed}};
  if (all) {
    body["all"] = true;
  } else {
    body["tags"] = tags;
  }
  std::string text = dump_text(body);
  co_await exchange.send_json(http::status::ok, std::move(text));
}

}  // namespace hengshi::server
