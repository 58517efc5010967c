// The errors a client key can get, in OpenAI's shape and with OpenAI's codes, so the SDKs raise
// AuthenticationError (401), PermissionDeniedError (403) and RateLimitError (429). Messages name
// the key's NAME at most, never the key.
#pragma once

#include <string>

#include "core/api_error.h"

namespace hengshi::server::key_errors {

inline ApiError invalid_api_key(std::string message) {
  return {401, "invalid_request_error", "invalid_api_key", std::move(message), {}};
}
inline ApiError model_not_allowed(const std::string& key, const std::string& model) {
  return {403, "permission_error", "model_not_allowed",
          "key '" + key + "' may not use model '" + model + "'", "model"};
}
inline ApiError pool_not_allowed(const std::string& key, const std::string& pool) {
  return {403,
          "permission_error",
          "pool_not_allowed",
          "this request routes to pool '" + pool + "', which key '" + key + "' may not use",
          {}};
}
inline ApiError rate_limited(const std::string& key, const std::string& limit) {
  // OpenAI's type says which limit: "requests" or "tokens".
  return {429,
          limit == "rpm" ? "requests" : "tokens",
          "rate_limit_exceeded",
          "key '" + key + "' reached its " + (limit == "rpm" ? "requests" : "tokens") +
              " per minute limit; retry after the Retry-After seconds",
          {}};
}
inline ApiError insufficient_quota(const std::string& key) {
  return {429,
          "insufficient_quota",
          "insufficient_quota",
          "key '" + key + "' has used its spend budget",
          {}};
}

}  // namespace hengshi::server::key_errors
