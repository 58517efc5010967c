// The gateway's HTTP metrics, declared in one place (STYLE.md: stats next to the code that
// bumps them). Series are looked up once per (route, status) and cached.
#pragma once

#include <string>
#include <string_view>

#include "obs/metrics.h"

namespace hengshi::server {

struct ServerMetrics {
  // hengshi_http_requests_total{route, method, status}; methods outside the standard verbs are
  // counted as "other" (the label set stays bounded whatever clients send)
  static void count_request(std::string_view route, std::string_view method, int status);
  // hengshi_http_request_duration_seconds{route}
  static void observe_latency(std::string_view route, double seconds);
  // hengshi_routed_requests_total{route, reason}: one per chat decision
  static void count_decision(std::string_view route, std::string_view reason);
  // hengshi_gateway_overhead_seconds: time in the gateway with upstream time excluded
  static void observe_overhead(double seconds);
  // hengshi_client_disconnects_total{phase}
  static void count_disconnect(const std::string& phase);
  // hengshi_tokens_total{pool, kind} and hengshi_cost_total{pool}
  static void count_tokens(const std::string& pool, long prompt, long completion, double cost);
  // hengshi_edge_requests_total{engine, outcome} and hengshi_edge_seconds{engine}: edge answers
  static void observe_edge(const std::string& engine, const std::string& outcome, double seconds);
  // hengshi_edge_verifications_total{verdict}: yes | no | error (middle_band_verify)
  static void count_verification(const std::string& verdict);
  static obs::Gauge& in_flight();
  // hengshi_connections_rejected_total{reason}: closed at accept (max_connections[_per_ip])
  static void count_connection_rejected(const std::string& reason);
  // hengshi_accept_errors_total{error}: emfile | other
  static void count_accept_error(const std::string& error);
  // hengshi_open_connections
  static obs::Gauge& open_connections();
  // hengshi_handler_exceptions_total: requests whose handler threw (answered 500)
  static void count_handler_exception();
};

}  // namespace hengshi::server
