#include "chain/chain_metrics.h"

#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>

#include "obs/metrics.h"

namespace hengshi::chain {
namespace {

using obs::Registry;

// Each (family, labels) is looked up in the registry once per thread: the registry's lookup
// takes a process-wide lock and builds a label map, too much for every attempt of every request.
obs::Counter& cached_counter(const char* name, const char* help, std::initializer_list<std::pair<const char*, std::string_view>> labels) {
  thread_local std::unordered_map<std::string, obs::Counter*> cache;
  std::string key = name;
  for (const auto& [label, value] : labels) {
    key += '\x1f';
    key.append(value);
  }
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  obs::Labels map;
  for (const auto& [label, value] : labels) map.emplace_back(label, std::string(value));
  obs::Counter& counter = Registry::global().counter(name, help, map);
  cache.emplace(std::move(key), &counter);
  return counter;
}

}  // namespace

void ChainMetrics::count_hop(std::string_view level, std::string_view source, std::string_view outcome) {
  cached_counter("hengshi_chain_hops_total", "Levels of the degradation chain walked, by outcome",
                 {{"level", level}, {"source", source}, {"outcome", outcome}})
      .inc();
}

void ChainMetrics::count_attempt(std::string_view source, std::string_view outcome) {
  cached_counter("hengshi_chain_attempts_total", "Attempts at a source (retries included), by outcome",
                 {{"source", source}, {"outcome", outcome}})
      .inc();
}

void ChainMetrics::count_retry(std::string_view source) {
  cached_counter("hengshi_chain_retries_total", "Attempts after the first at the same level", {{"source", source}})
      .inc();
}

void ChainMetrics::count_answer(std::string_view level, std::string_view kind) {
  cached_counter("hengshi_chain_answers_total",
                 "Requests answered, by the chain level that answered and the kind of answer (model, or the "
                 "gateway's own: canned, handoff)",
                 {{"level", level}, {"kind", kind}})
      .inc();
}

void ChainMetrics::count_stream_failure(std::string_view phase) {
  cached_counter("hengshi_chain_stream_failures_total",
                 "Stream attempts that failed: before the commit point (replaced invisibly) or after it",
                 {{"phase", phase}})
      .inc();
}

}  // namespace hengshi::chain
