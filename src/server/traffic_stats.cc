#include "server/traffic_stats.h"

#include <map>
#include <string>
#include <vector>

namespace hengshi::server {
namespace {

using nlohmann::json;

std::string label(const obs::Labels& labels, const std::string& name) {
  for (const auto& [key, value] : labels) {
    if (key == name) return value;
  }
  return {};
}

// Sums of a family's series grouped by one label ("" = the total).
std::map<std::string, double> sum_by(const obs::Registry& registry, const std::string& family,
                                     const std::string& by = {}) {
  std::map<std::string, double> out;
  for (const auto& sample : registry.values(family)) out[by.empty() ? "" : label(sample.labels, by)] += sample.value;
  return out;
}

double total(const obs::Registry& registry, const std::string& family) {
  double sum = 0.0;
  for (const auto& sample : registry.values(family)) sum += sample.value;
  return sum;
}

json rate(double hits, double samples) {
  return {{"rate", samples > 0 ? json(hits / samples) : json(nullptr)}, {"samples", samples}};
}

// Histograms of one family merged per value of `by`, then read as percentiles in ms.
json percentiles_by(const obs::Registry& registry, const std::string& family, const std::string& by) {
  struct Merged {
    const std::vector<double>* bounds = nullptr;
    std::vector<std::uint64_t> counts;
    std::uint64_t total = 0;
  };
  std::map<std::string, Merged> merged;
  for (const auto& [labels, histogram] : registry.histograms(family)) {
    Merged& slot = merged[label(labels, by)];
    slot.bounds = &histogram->upper_bounds();  // one family: the same bounds for every series
    slot.counts.resize(slot.bounds->size(), 0);
    for (std::size_t i = 0; i < slot.counts.size(); ++i) slot.counts[i] += histogram->bucket_count(i);
    slot.total += histogram->count();
  }
  json out = json::object();
  for (const auto& [key, slot] : merged) {
    auto ms = [&](double q) { return obs::bucket_quantile(*slot.bounds, slot.counts, slot.total, q) * 1000.0; };
    out[key] = {{"requests", slot.total}, {"p50_ms", ms(0.50)}, {"p95_ms", ms(0.95)}, {"p99_ms", ms(0.99)}};
  }
  return out;
}

}  // namespace

json traffic_stats(const obs::Registry& registry) {
  json out = json::object();
  const auto by_kind = sum_by(registry, "hengshi_answered_total", "kind");
  const auto by_who = sum_by(registry, "hengshi_answered_total", "by");
  const double requests = total(registry, "hengshi_answered_total");
  out["requests"] = requests;
  json answers = json::object();
  for (const char* kind : {"model", "canned", "handoff", "stale", "error"}) {
    auto it = by_kind.find(kind);
    answers[kind] = it == by_kind.end() ? 0.0 : it->second;
  }
  out["answers"] = answers;
  json routes = json::object();
  for (const auto& [who, count] : by_who) {
    routes[who] = {{"requests", count}, {"share", requests > 0 ? count / requests : 0.0}};
  }
  out["routes"] = routes;
  out["latency"] = percentiles_by(registry, "hengshi_request_seconds", "route");
  out["ttft"] = percentiles_by(registry, "hengshi_request_ttft_seconds", "route");

  const double billed = total(registry, "hengshi_cost_total");
  const double all_cloud = total(registry, "hengshi_cost_all_cloud_large_total");
  json by_pool = json::object();
  for (const auto& [pool, cost] : sum_by(registry, "hengshi_cost_total", "pool")) by_pool[pool] = cost;
  out["cost"] = {{"billed", billed},
                 {"all_cloud_large", all_cloud},
                 {"saved", all_cloud - billed},
                 {"saved_share", all_cloud > 0 ? json((all_cloud - billed) / all_cloud) : json(nullptr)},
                 {"by_pool", by_pool}};

  const auto entered = sum_by(registry, "hengshi_edge_entered_total", "task_type");
  double entered_all = 0.0;
  for (const auto& [task, n] : entered) entered_all += n;
  json by_type = json::object();
  json by_task = json::object();
  double fallbacks_all = 0.0;
  std::map<std::string, double> fallbacks_by_task;
  for (const auto& sample : registry.values("hengshi_edge_fallbacks_total")) {
    fallbacks_all += sample.value;
    by_type[label(sample.labels, "fallback_type")] =
        by_type.value(label(sample.labels, "fallback_type"), 0.0) + sample.value;
    fallbacks_by_task[label(sample.labels, "task_type")] += sample.value;
  }
  for (const auto& [task, n] : entered) {
    json row = rate(fallbacks_by_task[task], n);
    row["entered"] = n;
    by_task[task] = row;
  }
  json fallback = rate(fallbacks_all, entered_all);
  fallback["entered"] = entered_all;
  fallback["by_type"] = by_type;
  fallback["by_task_type"] = by_task;
  out["edge_fallback"] = fallback;

  double cloud_agree = 0, cloud_all = 0, edge_disagree = 0, edge_all = 0;
  for (const auto& sample : registry.values("hengshi_shadow_verdicts_total")) {
    const bool agree = label(sample.labels, "verdict") == "agree";
    if (label(sample.labels, "served") == "cloud") {
      cloud_all += sample.value;
      if (agree) cloud_agree += sample.value;
    } else {
      edge_all += sample.value;
      if (!agree) edge_disagree += sample.value;
    }
  }
  out["shadow"] = {{"false_fallback", rate(cloud_agree, cloud_all)},
                   {"missed_fallback", rate(edge_disagree, edge_all)}};

  json cache = {{"hits", json::object()}, {"misses", total(registry, "hengshi_cache_misses_total")}};
  double hits = 0.0;
  for (const auto& [tier, n] : sum_by(registry, "hengshi_cache_hits_total", "tier")) {
    cache["hits"][tier] = n;
    hits += n;
  }
  const double lookups = hits + cache["misses"].get<double>();
  cache["hit_rate"] = lookups > 0 ? json(hits / lookups) : json(nullptr);
  out["cache"] = cache;

  json breakers = json::object();
  for (const auto& sample : registry.values("hengshi_breaker_state")) {
    const int state = static_cast<int>(sample.value);
    breakers[label(sample.labels, "pool") + "/" + label(sample.labels, "upstream")] =
        state == 0 ? "closed" : state == 1 ? "open" : "half_open";
  }
  out["breakers"] = breakers;
  out["offline"] = total(registry, "hengshi_offline") > 0;
  return out;
}

}  // namespace hengshi::server
