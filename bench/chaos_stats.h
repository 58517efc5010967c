// The figures bench_chaos prints for one phase of one target, over the requests due in the
// phase (optionally only the questions of one kind). A 200 is not an answer: model answers (edge
// or cloud) are counted apart from the gateway's own canned replies and hand-offs, and from
// errors (no valid 200).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chaos_load.h"

namespace hengshi::bench {

struct PhaseStats {
  std::size_t requests = 0;
  std::size_t model = 0;           // valid 200s answered by a model (L0..L3)
  std::size_t degraded_edge = 0;   // of which the edge LLM at L1
  std::size_t from_cloud = 0;      // of which a cloud pool
  std::size_t from_cloud_large = 0;
  std::size_t canned = 0;          // valid 200s from the gateway itself (L4, hand-off, safe reply)
  std::size_t errors = 0;          // everything else: non-200, invalid, timeouts, no answer
  std::size_t model_in_deadline = 0;
  std::size_t answered_in_deadline = 0;  // model or canned, within the deadline
  std::size_t held = 0;            // streams held to the commit point
  std::size_t streams = 0;
  double attempts = 0;             // hengshi.attempts summed (answers that carry it)
  double calls_small = 0;          // cloud-small attempts summed (from the hops)
  double calls_large = 0;          // cloud-large attempts summed
  double calls_member_open = 0;
  std::size_t first_attempts = 0;  // requests with a cloud attempt ...
  std::size_t first_at_bad = 0;    // ... whose first went to the member named `bad_member`
  std::int64_t p50_us = 0, p95_us = 0, p99_us = 0;
  std::optional<std::int64_t> ttft_p50_us, ttft_p95_us;  // streams with a first piece

  double share(std::size_t part) const {
    return requests == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(requests);
  }
  double per_request(double total) const { return requests == 0 ? 0.0 : total / static_cast<double>(requests); }
};

struct PhaseWindow {
  double start_s = 0;
  double end_s = 0;
};

// `only`: count only questions of that kind (nullopt: all). `bad_member`: the member whose share
// of first cloud attempts is counted ("" = none).
PhaseStats phase_stats(const std::vector<Planned>& schedule, const std::vector<Outcome>& outcomes,
                       PhaseWindow window, std::int64_t deadline_ms, std::optional<Question> only,
                       const std::string& bad_member = "");

// Seconds from `from_s` until the cloud answers >= `share` of the cloud questions due in every
// `bucket_s` slice from then to `to_s`; nullopt when that never happens.
std::optional<double> time_to_cloud_answers(const std::vector<Planned>& schedule, const std::vector<Outcome>& outcomes,
                                            double from_s, double to_s, double share, double bucket_s);

std::int64_t percentile(std::vector<std::int64_t> values, double p);

}  // namespace hengshi::bench
