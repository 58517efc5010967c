// RequestOutcome: what one chat request came to, read once from its ResponseMeta when it ends —
// the figures behind the operator's metrics, /admin/stats and the dashboard. Honest denominators:
// an answer's kind (model / canned / hand-off / stale) is kept apart from its status, and the edge
// fallback rate is over the requests that *entered* the edge, so capability admissions (which
// never reach it) do not dilute it.
//
// Entered the edge: an edge step of the plan was walked (not skipped), or the router consulted the
// edge and sent the request on for its quality (low confidence, out of scope, middle band) or its
// time (latency_pressure). A cache hit entered nothing. A fall back = entered, and the answer did
// not come from an edge source; its type is the decision's fallback_type, or "error" when the edge
// was tried and failed at run time.
//
// Pure: outcome_of() reads, record() bumps the metrics (thread-safe, lock-free after the first
// request of each label set).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/response_meta.h"

namespace hengshi::server {

// The labels are views of static names (to_string() of the enums, literals), so an outcome copies
// no strings; only the task type, computed per request, is owned.
struct RequestOutcome {
  std::string_view route;   // the decision's route (edge, cloud_small, ...)
  std::string_view reason;  // its reason
  std::string_view level;   // "L0".."L4" that answered; "none" without an answer
  std::string_view kind;    // model | canned | handoff | stale | error (no answer)
  // edge | cloud-small | cloud-large | cache | gateway (canned) | none
  std::string_view answered_by;
  std::string task_type;  // a bounded label: the policy's task type, "other", or "none"
  int status = 0;
  bool entered_edge = false;
  std::string_view fallback;  // "" = none; quality | timeout | error (only when entered_edge)
  double seconds = 0.0;                // total
  std::optional<double> ttft_seconds;  // streams
  double cost = 0.0;                   // billed for this request
  double all_cloud_large_cost = 0.0;   // the same tokens at cloud-large's prices
};

// Prices of a pool, per 1k tokens (a pool's mean over its members).
struct TokenPrices {
  double input_per_1k = 0.0;
  double output_per_1k = 0.0;
  double cost(std::int64_t prompt, std::int64_t completion) const {
    return static_cast<double>(prompt) / 1000.0 * input_per_1k +
           static_cast<double>(completion) / 1000.0 * output_per_1k;
  }
};

// `task_label` is already bounded (see ChatCompletions). Tokens are the answer's (edge answers
// carry estimated ones), priced at `counterfactual` for the all-cloud-large figure.
RequestOutcome outcome_of(const ResponseMeta& meta, int status, std::string task_label, double seconds,
                          std::optional<double> ttft_seconds, std::int64_t prompt_tokens,
                          std::int64_t completion_tokens, const TokenPrices& counterfactual);

struct OutcomeMetrics {
  // hengshi_requests_total{route, reason, level, kind, task_type, status};
  // hengshi_answered_total{by, kind};
  // hengshi_request_seconds{route, level} and hengshi_request_ttft_seconds{route, level};
  // hengshi_edge_entered_total{task_type}, hengshi_edge_fallbacks_total{fallback_type, task_type};
  // hengshi_cost_all_cloud_large_total: the counterfactual beside hengshi_cost_total{pool}.
  static void record(const RequestOutcome& outcome);
};

}  // namespace hengshi::server
