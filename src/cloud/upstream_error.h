// UpstreamError: why a call to a cloud upstream failed, classified once at the point of failure
// so retries, breakers and the client's error all agree on what happened.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/api_error.h"

namespace hengshi::cloud {

enum class UpstreamErrorKind {
  connect_failed,   // DNS, refused, TLS handshake: nothing was sent        (retryable)
  connect_timeout,  // no connection within connect_timeout_ms              (retryable)
  ttft_timeout,     // no first response byte within ttft_timeout_ms        (retryable)
  total_timeout,    // exchange longer than total_timeout_ms or the deadline (retryable)
  rate_limited,     // HTTP 429                                              (retryable)
  server_error,     // HTTP 5xx                                              (retryable)
  client_error,     // other HTTP 4xx: the request itself is wrong          (not retryable)
  auth_failed,      // HTTP 401/403: the upstream refused the gateway's key (not retryable)
  bad_response,     // not HTTP, not JSON, not an OpenAI shape               (not retryable)
  closed_early,     // connection closed before the response was complete   (retryable*)
  overloaded,       // every member of the pool is at max_concurrent, or the (retryable)
                    // pool's bulkhead queue is full / its wait ran out
  cancelled,        // the client went away                                  (not retryable)
  circuit_open,     // every member's circuit breaker is open: no call made  (not retryable)
};
// * Nothing is retryable once after_first_byte is set: the client already has part of an answer.

const char* to_string(UpstreamErrorKind kind);

// Whether an error says the member is unhealthy: counted as a failure by its circuit breaker and
// penalised in its latency score. The other kinds (client_error, auth_failed, cancelled,
// overloaded, circuit_open) say nothing about the member's health and are not counted at all
// (neither success nor failure).
bool counts_against_member(UpstreamErrorKind kind);

struct UpstreamError {
  UpstreamErrorKind kind = UpstreamErrorKind::bad_response;
  std::string message;                         // human detail, never contains the API key
  std::string upstream;                        // member name that failed, empty if none picked
  int http_status = 0;                         // upstream status when there was one
  std::string upstream_body;                   // upstream error body (4xx except 401/403), for
                                               // pass-through; may be invalid UTF-8
  std::optional<std::int64_t> retry_after_ms;  // from Retry-After on 429/503
  bool after_first_byte = false;               // some of the response already reached the client
  bool member_open = false;  // the call reached a member whose breaker is open (pool in panic):
                             // a single attempt, never retried at the same level

  bool retryable() const;
  // The error the gateway's client sees: 502 for a broken upstream, 504 for a timeout,
  // 429/503 for overload, the upstream's own status for its 4xx — except 401/403, which are the
  // gateway's credentials failing: 502 upstream_auth_failed, without the upstream's message.
  // Every message is valid UTF-8.
  ApiError to_api_error() const;
};

}  // namespace hengshi::cloud
