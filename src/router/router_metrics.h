// The router's metrics, declared in one place (STYLE.md): decisions by route and reason are
// counted by the server (hengshi_routed_requests_total); these add what only the router sees.
#pragma once

#include <string>

#include "core/decision.h"

namespace hengshi::router {

struct RouteInput;

struct RouterMetrics {
  // hengshi_router_pii_total, hengshi_router_sensitive_total{rule},
  // hengshi_router_unknown_task_type_total, hengshi_router_complexity{score},
  // hengshi_session_cloud_calls_total
  static void count(const Decision& decision, const RouteInput& input);
  // hengshi_router_policy_reloads_total{outcome}: applied | rejected
  static void count_reload(const std::string& outcome);
  // hengshi_router_policy_info{version} 1
  static void set_policy_version(const std::string& version);
};

}  // namespace hengshi::router
