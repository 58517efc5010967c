#include "router/router_metrics.h"

#include <mutex>

#include "obs/metric_family.h"
#include "obs/metrics.h"
#include "router/decide.h"

namespace hengshi::router {

using obs::Registry;

void RouterMetrics::count(const Decision& decision, const RouteInput& input) {
  auto& registry = Registry::global();
  if (decision.reason == Reason::pii_pin || decision.reason == Reason::pii_uncheckable ||
      decision.reason == Reason::non_text_refused) {
    registry
        .counter("hengshi_router_pii_total", "Requests kept off the cloud by the PII stage",
                 {{"reason", std::string(to_string(decision.reason))}})
        .inc();
  }
  if (auto it = decision.figures.find("signal"); it != decision.figures.end()) {
    registry.counter("hengshi_router_sensitive_total", "Requests routed by a sensitive signal",
                     {{"rule", it->get<std::string>()}})
        .inc();
  }
  if (decision.figures.contains("task_type_unknown")) {
    static obs::Counter& unknown = registry.counter(
        "hengshi_router_unknown_task_type_total", "Requests whose task_type has no capability row (default row used)");
    unknown.inc();
  }
  if (auto it = decision.figures.find("complexity"); it != decision.figures.end()) {
    static obs::CounterFamily complexity("hengshi_router_complexity_total",
                                         "Routed requests by the hand-written 1..5 complexity score", {"score"});
    complexity.at({std::to_string(it->get<int>())}).inc();
  }
  // The learned model scores only requests bound for a cloud tier; its verdict picks the tier.
  if (auto verdict = decision.figures.find("complexity_verdict");
      verdict != decision.figures.end()) {
    static obs::CounterFamily verdicts("hengshi_router_complexity_model_total",
                                       "Cloud-bound requests scored by the learned complexity model, by verdict",
                                       {"verdict"});
    verdicts.at({verdict->get_ref<const std::string&>()}).inc();
  }
  if (!input.session_id.empty() && is_cloud(decision.route)) {
    static obs::Counter& session_cloud =
        registry.counter("hengshi_session_cloud_calls_total", "Cloud calls made for requests with a session");
    session_cloud.inc();
  }
}

void RouterMetrics::count_reload(const std::string& outcome) {
  Registry::global()
      .counter("hengshi_router_policy_reloads_total", "Policy reloads by outcome", {{"outcome", outcome}})
      .inc();
}

void RouterMetrics::set_policy_version(const std::string& version) {
  static std::mutex mutex;
  static std::string current;
  std::lock_guard lock(mutex);
  auto& registry = Registry::global();
  const char* help = "The routing policy in force (1) and earlier ones (0)";
  if (!current.empty()) registry.gauge("hengshi_router_policy_info", help, {{"version", current}}).set(0);
  registry.gauge("hengshi_router_policy_info", help, {{"version", version}}).set(1);
  current = version;
}

}  // namespace hengshi::router
