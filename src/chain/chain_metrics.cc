#include "chain/chain_metrics.h"

#include "obs/metrics.h"

namespace hengshi::chain {

using obs::Registry;

void ChainMetrics::count_hop(std::string_view level, std::string_view source, std::string_view outcome) {
  Registry::global()
      .counter("hengshi_chain_hops_total", "Levels of the degradation chain walked, by outcome",
               {{"level", std::string(level)}, {"source", std::string(source)}, {"outcome", std::string(outcome)}})
      .inc();
}

void ChainMetrics::count_attempt(std::string_view source, std::string_view outcome) {
  Registry::global()
      .counter("hengshi_chain_attempts_total", "Attempts at a source (retries included), by outcome",
               {{"source", std::string(source)}, {"outcome", std::string(outcome)}})
      .inc();
}

void ChainMetrics::count_retry(std::string_view source) {
  Registry::global()
      .counter("hengshi_chain_retries_total", "Attempts after the first at the same level",
               {{"source", std::string(source)}})
      .inc();
}

void ChainMetrics::count_answer(std::string_view level) {
  Registry::global()
      .counter("hengshi_chain_answers_total", "Requests answered, by the chain level that answered",
               {{"level", std::string(level)}})
      .inc();
}

void ChainMetrics::count_stream_failure(std::string_view phase) {
  Registry::global()
      .counter("hengshi_chain_stream_failures_total",
               "Stream attempts that failed: before the commit point (replaced invisibly) or after it",
               {{"phase", std::string(phase)}})
      .inc();
}

}  // namespace hengshi::chain
