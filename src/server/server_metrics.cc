#include "server/server_metrics.h"

#include <array>

#include "obs/metric_family.h"

namespace hengshi::server {

using obs::Registry;

namespace {

std::string_view bounded_method(std::string_view method) {
  static constexpr std::array<std::string_view, 9> kMethods = {
      "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "-", "other"};
  for (const auto& known : kMethods) {
    if (method == known) return known;
  }
  return kMethods.back();
}

}  // namespace

void ServerMetrics::count_request(std::string_view route, std::string_view method, int status) {
  static obs::CounterFamily requests("hengshi_http_requests_total", "HTTP requests by route, method and status",
                                     {"route", "method", "status"});
  requests.at({route, bounded_method(method), std::to_string(status)}).inc();
}

void ServerMetrics::observe_latency(std::string_view route, double seconds) {
  static obs::HistogramFamily latency("hengshi_http_request_duration_seconds",
                                      "Time from request fully read to response fully written", {"route"});
  latency.at({route}).observe(seconds);
}

void ServerMetrics::count_decision(std::string_view route, std::string_view reason) {
  static obs::CounterFamily decisions("hengshi_routed_requests_total", "Chat requests by chosen route and reason",
                                      {"route", "reason"});
  decisions.at({route, reason}).inc();
}

void ServerMetrics::observe_overhead(double seconds) {
  static obs::Histogram& overhead = Registry::global().histogram(
      "hengshi_gateway_overhead_seconds", "Time spent in the gateway itself, upstream excluded");
  overhead.observe(seconds);
}

void ServerMetrics::count_disconnect(const std::string& phase) {
  Registry::global()
      .counter("hengshi_client_disconnects_total", "Clients that went away before the answer",
               {{"phase", phase}})
      .inc();
}

void ServerMetrics::count_tokens(const std::string& pool, long prompt, long completion, double cost) {
  static obs::CounterFamily tokens("hengshi_tokens_total", "Tokens by pool and kind", {"pool", "kind"});
  static obs::CounterFamily costs("hengshi_cost_total", "Cost in the configured price unit", {"pool"});
  tokens.at({pool, "prompt"}).inc(static_cast<double>(prompt));
  tokens.at({pool, "completion"}).inc(static_cast<double>(completion));
  costs.at({pool}).inc(cost);
}

void ServerMetrics::observe_edge(const std::string& engine, const std::string& outcome, double seconds) {
  static obs::CounterFamily calls("hengshi_edge_requests_total", "Edge engine calls by engine and outcome",
                                  {"engine", "outcome"});
  static obs::HistogramFamily times("hengshi_edge_seconds", "Edge engine time per request", {"engine"});
  calls.at({engine, outcome}).inc();
  times.at({engine}).observe(seconds);
}

void ServerMetrics::count_verification(const std::string& verdict) {
  Registry::global()
      .counter("hengshi_edge_verifications_total", "Cloud yes/no checks of middle-band edge answers",
               {{"verdict", verdict}})
      .inc();
}

obs::Gauge& ServerMetrics::in_flight() {
  static obs::Gauge& gauge =
      Registry::global().gauge("hengshi_http_in_flight_requests", "Requests being handled now");
  return gauge;
}

void ServerMetrics::count_connection_rejected(const std::string& reason) {
  Registry::global()
      .counter("hengshi_connections_rejected_total", "Connections closed at accept, by the cap they hit",
               {{"reason", reason}})
      .inc();
}

void ServerMetrics::count_accept_error(const std::string& error) {
  Registry::global()
      .counter("hengshi_accept_errors_total", "Failed accepts (emfile: out of descriptors)", {{"error", error}})
      .inc();
}

obs::Gauge& ServerMetrics::open_connections() {
  static obs::Gauge& gauge = Registry::global().gauge("hengshi_open_connections", "Open client connections");
  return gauge;
}

void ServerMetrics::count_handler_exception() {
  static obs::Counter& counter = Registry::global().counter(
      "hengshi_handler_exceptions_total", "Requests whose handler failed unexpectedly (answered 500)");
  counter.inc();
}

}  // namespace hengshi::server
