// AuthMetrics: the client-key and admin metrics, declared in one place next to the code that
// bumps them (key_store.cc, gateway_handler.cc, chat_completions.cc, admin_handler.cc). Labels
// carry a key's NAME, never the key or its hash. Thread-safe (the registry's).
#pragma once

#include <string>

namespace hengshi::server {

struct AuthMetrics {
  // hengshi_auth_failures_total{reason}: missing_key | invalid_key | model_not_allowed |
  // pool_not_allowed | admin_token | admin_origin | admin_host
  static void count_failure(const std::string& reason);
  // hengshi_key_requests_total{key}: authenticated requests per key
  static void count_request(const std::string& key);
  // hengshi_key_rate_limited_total{key,limit}: limit = rpm | tpm | budget
  static void count_rate_limited(const std::string& key, const std::string& limit);
  // hengshi_key_tokens_total{key} and hengshi_key_spend_total{key} (configured price unit)
  static void charge(const std::string& key, long tokens, double cost);
  // hengshi_keys_reloads_total{outcome}, hengshi_keys_loaded
  static void count_reload(const std::string& outcome);
  static void set_keys(double count);
};

}  // namespace hengshi::server
