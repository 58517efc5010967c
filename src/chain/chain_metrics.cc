#include "chain/chain_metrics.h"

#include "obs/metric_family.h"

namespace hengshi::chain {

void ChainMetrics::count_hop(std::string_view level, std::string_view source, std::string_view outcome) {
  static obs::CounterFamily hops("hengshi_chain_hops_total", "Levels of the degradation chain walked, by outcome",
                                 {"level", "source", "outcome"});
  hops.at({level, source, outcome}).inc();
}

void ChainMetrics::count_attempt(std::string_view source, std::string_view outcome) {
  static obs::CounterFamily attempts("hengshi_chain_attempts_total",
                                     "Attempts at a source (retries included), by outcome", {"source", "outcome"});
  attempts.at({source, outcome}).inc();
}

void ChainMetrics::count_retry(std::string_view source) {
  static obs::CounterFamily retries("hengshi_chain_retries_total", "Attempts after the first at the same level",
                                    {"source"});
  retries.at({source}).inc();
}

void ChainMetrics::count_answer(std::string_view level, std::string_view kind) {
  static obs::CounterFamily answers(
      "hengshi_chain_answers_total",
      "Requests answered, by the chain level that answered and the kind of answer (model, or the "
      "gateway's own: canned, handoff)",
      {"level", "kind"});
  answers.at({level, kind}).inc();
}

void ChainMetrics::count_stream_failure(std::string_view phase) {
  static obs::CounterFamily failures(
      "hengshi_chain_stream_failures_total",
      "Stream attempts that failed: before the commit point (replaced invisibly) or after it", {"phase"});
  failures.at({phase}).inc();
}

}  // namespace hengshi::chain
