#include "server/request_outcome.h"

#include "obs/metric_family.h"
#include "obs/metrics.h"

namespace hengshi::server {
namespace {

bool is_edge_source_name(std::string_view name) {
  const auto source = source_from_string(name);
  return source && is_edge(*source);
}

// Who answered, in the few values a dashboard shows: the edge, a pool, the cache, the gateway.
std::string_view answered_by_label(const ResponseMeta& meta) {
  const auto source = source_from_string(meta.answered_by);
  if (!source) return "none";
  if (is_edge(*source)) return "edge";
  // to_string(): a static name, spelled as answered_by spells it.
  if (is_cloud(*source) || *source == Source::cache) return to_string(*source);
  return "gateway";  // the hand-off, the safe reply, the last resort
}

bool walked_an_edge_step(const ResponseMeta& meta) {
  for (const HopRecord& hop : meta.hops) {
    if (is_edge(hop.source) && !hop.outcome.starts_with("skipped")) return true;
  }
  return false;
}

}  // namespace

RequestOutcome outcome_of(const ResponseMeta& meta, int status, std::string task_label, double seconds,
                          std::optional<double> ttft_seconds, std::int64_t prompt_tokens,
                          std::int64_t completion_tokens, const TokenPrices& counterfactual) {
  RequestOutcome out;
  out.route = to_string(meta.decision.route);
  out.reason = to_string(meta.decision.reason);
  const bool answered = meta.answer_kind.has_value();
  out.level = answered ? to_string(static_cast<Level>(meta.level)) : "none";
  out.kind = answered ? to_string(*meta.answer_kind) : "error";
  out.answered_by = answered_by_label(meta);
  out.task_type = std::move(task_label);
  out.status = status;
  const bool cache_hit = meta.answered_by == to_string(Source::cache);
  const FallbackType type = meta.decision.fallback_type;
  out.entered_edge = !cache_hit && (walked_an_edge_step(meta) || type == FallbackType::quality ||
                                    type == FallbackType::timeout);
  if (out.entered_edge && !is_edge_source_name(meta.answered_by)) {
    out.fallback =
        type == FallbackType::none || type == FallbackType::capability ? "error" : to_string(type);
  }
  out.seconds = seconds;
  out.ttft_seconds = ttft_seconds;
  out.cost = meta.cost.value_or(0.0);
  if (answered) out.all_cloud_large_cost = counterfactual.cost(prompt_tokens, completion_tokens);
  return out;
}

void OutcomeMetrics::record(const RequestOutcome& outcome) {
  static obs::CounterFamily requests(
      "hengshi_requests_total",
      "Chat requests by decision route and reason, the level and kind of their answer "
      "(model | canned | handoff | stale | error), task type and HTTP status",
      {"route", "reason", "level", "kind", "task_type", "status"});
  static obs::CounterFamily answered(
      "hengshi_answered_total",
      "Chat requests by who answered (edge | cloud-small | cloud-large | cache | gateway | none) "
      "and answer kind",
      {"by", "kind"});
  static obs::HistogramFamily latency("hengshi_request_seconds",
                                      "Chat request total latency by decision route and answering level",
                                      {"route", "level"});
  static obs::HistogramFamily ttft("hengshi_request_ttft_seconds",
                                   "Streamed chat requests: time to the first content chunk, by route and level",
                                   {"route", "level"});
  static obs::CounterFamily entered("hengshi_edge_entered_total",
                                    "Chat requests that entered the edge (the denominator of the edge fallback rate)",
                                    {"task_type"});
  static obs::CounterFamily fallbacks(
      "hengshi_edge_fallbacks_total",
      "Requests that entered the edge and were answered elsewhere, by fallback type "
      "(quality | timeout | error) and task type",
      {"fallback_type", "task_type"});
  static obs::Counter& counterfactual = obs::Registry::global().counter(
      "hengshi_cost_all_cloud_large_total",
      "What the answered requests would have cost at cloud-large's prices (the all-cloud "
      "counterfactual of hengshi_cost_total)");

  // A status's digits fit std::string's inline buffer: no allocation.
  requests.at({outcome.route, outcome.reason, outcome.level, outcome.kind, outcome.task_type,
               std::to_string(outcome.status)})
      .inc();
  answered.at({outcome.answered_by, outcome.kind}).inc();
  latency.at({outcome.route, outcome.level}).observe(outcome.seconds);
  if (outcome.ttft_seconds) ttft.at({outcome.route, outcome.level}).observe(*outcome.ttft_seconds);
  if (outcome.entered_edge) {
    entered.at({outcome.task_type}).inc();
    if (!outcome.fallback.empty()) fallbacks.at({outcome.fallback, outcome.task_type}).inc();
  }
  counterfactual.inc(outcome.all_cloud_large_cost);
}

}  // namespace hengshi::server
