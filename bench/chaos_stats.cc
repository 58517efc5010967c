#include "chaos_stats.h"

#include <algorithm>
#include <cmath>

namespace hengshi::bench {
namespace {

double due_s(const Planned& planned) { return std::chrono::duration<double>(planned.offset).count(); }

bool from_cloud(const Outcome& out) { return out.answered_by.rfind("cloud-", 0) == 0; }

}  // namespace

std::int64_t percentile(std::vector<std::int64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

PhaseStats phase_stats(const std::vector<Planned>& schedule, const std::vector<Outcome>& outcomes,
                       PhaseWindow window, std::int64_t deadline_ms, std::optional<Question> only,
                       const std::string& bad_member) {
  PhaseStats stats;
  std::vector<std::int64_t> latencies;
  std::vector<std::int64_t> ttfts;
  for (std::size_t i = 0; i < schedule.size() && i < outcomes.size(); ++i) {
    const double at = due_s(schedule[i]);
    if (at < window.start_s || at >= window.end_s) continue;
    if (only && schedule[i].question != *only) continue;
    const Outcome& out = outcomes[i];
    ++stats.requests;
    latencies.push_back(out.latency_us);
    if (out.attempts) stats.attempts += *out.attempts;
    stats.calls_small += out.calls_small;
    stats.calls_large += out.calls_large;
    if ((out.model_answer() || out.canned_answer()) && out.latency_us <= deadline_ms * 1000) {
      ++stats.answered_in_deadline;
    }
    stats.calls_member_open += out.calls_member_open;
    if (!out.first_upstream.empty()) {
      ++stats.first_attempts;
      if (!bad_member.empty() && out.first_upstream == bad_member) ++stats.first_at_bad;
    }
    if (schedule[i].stream) {
      ++stats.streams;
      if (out.committed_after_pieces.value_or(0) > 0) ++stats.held;
      if (out.ttft_us && out.model_answer()) ttfts.push_back(*out.ttft_us);
    }
    if (out.model_answer()) {
      ++stats.model;
      if (out.level == 1) ++stats.degraded_edge;
      if (from_cloud(out)) ++stats.from_cloud;
      if (out.answered_by == "cloud-large") ++stats.from_cloud_large;
      if (out.latency_us <= deadline_ms * 1000) ++stats.model_in_deadline;
    } else if (out.canned_answer()) {
      ++stats.canned;
    } else {
      ++stats.errors;
    }
  }
  stats.p50_us = percentile(latencies, 0.50);
  stats.p95_us = percentile(latencies, 0.95);
  stats.p99_us = percentile(latencies, 0.99);
  if (!ttfts.empty()) {
    stats.ttft_p50_us = percentile(ttfts, 0.50);
    stats.ttft_p95_us = percentile(ttfts, 0.95);
  }
  return stats;
}

std::optional<double> time_to_cloud_answers(const std::vector<Planned>& schedule, const std::vector<Outcome>& outcomes,
                                            double from_s, double to_s, double share, double bucket_s) {
  const auto buckets = static_cast<std::size_t>(std::ceil((to_s - from_s) / bucket_s));
  std::vector<std::size_t> total(buckets, 0), cloud(buckets, 0);
  for (std::size_t i = 0; i < schedule.size() && i < outcomes.size(); ++i) {
    const double at = due_s(schedule[i]);
    if (at < from_s || at >= to_s || schedule[i].question != Question::cloud) continue;
    const auto b = std::min(buckets - 1, static_cast<std::size_t>((at - from_s) / bucket_s));
    ++total[b];
    if (outcomes[i].model_answer() && from_cloud(outcomes[i])) ++cloud[b];
  }
  // The first bucket from which every later one (with requests) reaches the share.
  std::optional<std::size_t> first;
  for (std::size_t b = buckets; b-- > 0;) {
    if (total[b] == 0) continue;
    if (static_cast<double>(cloud[b]) < share * static_cast<double>(total[b])) break;
    first = b;
  }
  if (!first) return std::nullopt;
  return static_cast<double>(*first) * bucket_s;
}

}  // namespace hengshi::bench
