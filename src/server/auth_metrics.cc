#include "server/auth_metrics.h"

#include "obs/metric_family.h"
#include "obs/metrics.h"

namespace hengshi::server {

using obs::Registry;

void AuthMetrics::count_failure(const std::string& reason) {
  Registry::global()
      .counter("hengshi_auth_failures_total", "Requests refused by client-key or admin checks",
               {{"reason", reason}})
      .inc();
}

void AuthMetrics::count_request(const std::string& key) {
  // Once per request: a family resolves the key's series without building name, help and labels.
  static obs::CounterFamily requests("hengshi_key_requests_total", "Authenticated requests by key name", {"key"});
  requests.at({key}).inc();
}

void AuthMetrics::count_rate_limited(const std::string& key, const std::string& limit) {
  Registry::global()
      .counter("hengshi_key_rate_limited_total", "Requests refused by a key's limit",
               {{"key", key}, {"limit", limit}})
      .inc();
}

void AuthMetrics::charge(const std::string& key, long tokens, double cost) {
  static obs::CounterFamily key_tokens("hengshi_key_tokens_total", "Tokens charged to a key", {"key"});
  static obs::CounterFamily key_spend("hengshi_key_spend_total", "Spend charged to a key, configured price unit",
                                      {"key"});
  key_tokens.at({key}).inc(static_cast<double>(tokens));
  key_spend.at({key}).inc(cost);
}

void AuthMetrics::count_reload(const std::string& outcome) {
  Registry::global()
      .counter("hengshi_keys_reloads_total", "Keys file reloads by outcome", {{"outcome", outcome}})
      .inc();
}

void AuthMetrics::set_keys(double count) {
  static obs::Gauge& gauge =
      Registry::global().gauge("hengshi_keys_loaded", "Client keys in the running set");
  gauge.set(count);
}

}  // namespace hengshi::server
