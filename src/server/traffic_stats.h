// traffic_stats: GET /admin/stats — the operator's summary, computed from the metrics registry
// (the metrics are the one record of traffic; this is a view of them, so the two never
// disagree). Also what the dashboard polls.
//
//   requests, answers by kind (model | canned | handoff | stale | error),
//   routes: who answered (edge | cloud-small | cloud-large | cache | gateway | none), count + share,
//   latency per route (p50/p95/p99 ms from hengshi_request_seconds, TTFT for streams),
//   cost: billed, all_cloud_large (the counterfactual), saved and saved_share, by pool,
//   edge_fallback: over the requests that entered the edge, by type and task type,
//   shadow: the false and missed fallback rates, each with its sample count,
//   cache: hits per tier and misses; breakers per member; offline.
//
// A rate over no samples is null, never 0: "nothing measured" is not "never happens".
#pragma once

#include <nlohmann/json.hpp>

#include "obs/metrics.h"

namespace hengshi::server {

nlohmann::json traffic_stats(const obs::Registry& registry);

}  // namespace hengshi::server
