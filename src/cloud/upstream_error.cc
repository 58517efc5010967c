#include "cloud/upstream_error.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace hengshi::cloud {

const char* to_string(UpstreamErrorKind kind) {
  switch (kind) {
    case UpstreamErrorKind::connect_failed:
      return "connect_failed";
    case UpstreamErrorKind::connect_timeout:
      return "connect_timeout";
    case UpstreamErrorKind::ttft_timeout:
      return "ttft_timeout";
    case UpstreamErrorKind::total_timeout:
      return "total_timeout";
    case UpstreamErrorKind::rate_limited:
      return "rate_limited";
    case UpstreamErrorKind::server_error:
      return "server_error";
    case UpstreamErrorKind::client_error:
      return "client_error";
    case UpstreamErrorKind::auth_failed:
      return "auth_failed";
    case UpstreamErrorKind::bad_response:
      return "bad_response";
    case UpstreamErrorKind::closed_early:
      return "closed_early";
    case UpstreamErrorKind::overloaded:
      return "overloaded";
    case UpstreamErrorKind::cancelled:
      return "cancelled";
    case UpstreamErrorKind::circuit_open:
      return "circuit_open";
  }
  return "unknown";
}

bool counts_against_member(UpstreamErrorKind kind) {
  switch (kind) {
    case UpstreamErrorKind::connect_failed:
    case UpstreamErrorKind::connect_timeout:
    case UpstreamErrorKind::ttft_timeout:
    case UpstreamErrorKind::total_timeout:
    case UpstreamErrorKind::rate_limited:
    case UpstreamErrorKind::server_error:
    case UpstreamErrorKind::closed_early:
    case UpstreamErrorKind::bad_response:
      return true;
    case UpstreamErrorKind::client_error:
    case UpstreamErrorKind::auth_failed:
    case UpstreamErrorKind::cancelled:
    case UpstreamErrorKind::overloaded:
    case UpstreamErrorKind::circuit_open:
      return false;
  }
  return false;
}

bool UpstreamError::retryable() const {
  // Once part of the answer reached the client, a second upstream cannot continue it seamlessly.
  if (after_first_byte) return false;
  switch (kind) {
    case UpstreamErrorKind::connect_failed:
    case UpstreamErrorKind::connect_timeout:
    case UpstreamErrorKind::ttft_timeout:
    case UpstreamErrorKind::total_timeout:
    case UpstreamErrorKind::rate_limited:
    case UpstreamErrorKind::server_error:
    case UpstreamErrorKind::closed_early:
    case UpstreamErrorKind::overloaded:
      return true;
    case UpstreamErrorKind::client_error:
    case UpstreamErrorKind::auth_failed:
    case UpstreamErrorKind::bad_response:
    case UpstreamErrorKind::cancelled:
    case UpstreamErrorKind::circuit_open:  // the pool is skipped at once; the chain moves on
      return false;
  }
  return false;
}

namespace {

constexpr std::size_t kMaxPassThroughBytes = 1024;  // of a non-JSON upstream error body

// Messages may quote upstream text: made valid UTF-8 here, whatever the caller built.
std::string describe(const UpstreamError& error, const char* what, bool with_detail = true) {
  std::string text = what;
  if (!error.upstream.empty()) text += " (upstream '" + error.upstream + "')";
  if (with_detail && !error.message.empty()) text += ": " + error.message;
  return valid_utf8(text);
}

// The upstream's 4xx, as the client should see it: its status, and its OpenAI error object's
// message/type/code/param when the body is one (otherwise the body text itself).
ApiError pass_through_client_error(const UpstreamError& error) {
  ApiError api{error.http_status >= 400 && error.http_status < 500 ? error.http_status : 400,
               "invalid_request_error",
               "upstream_client_error",
               {},
               {}};
  auto body = nlohmann::json::parse(error.upstream_body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* object = nullptr;
  if (body.is_object()) {
    auto it = body.find("error");
    if (it != body.end() && it->is_object()) object = &*it;
  }
  if (object != nullptr) {
    auto text = [&](const char* key) -> std::string {
      auto it = object->find(key);
      return it != object->end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (auto message = text("message"); !message.empty()) api.message = std::move(message);
    if (auto type = text("type"); !type.empty()) api.type = std::move(type);
    if (auto code = text("code"); !code.empty()) api.code = std::move(code);
    api.param = text("param");
  } else if (body.is_object() && body.contains("message") && body["message"].is_string()) {
    api.message = body["message"].get<std::string>();
  } else if (!error.upstream_body.empty()) {
    // Not JSON: raw text, possibly cut mid-character or not UTF-8 at all.
    api.message = utf8_snippet(error.upstream_body, kMaxPassThroughBytes);
  }
  if (api.message.empty()) api.message = describe(error, "upstream rejected the request");
  return api;
}

}  // namespace

ApiError UpstreamError::to_api_error() const {
  switch (kind) {
    case UpstreamErrorKind::connect_failed:
      return ApiError::bad_gateway("upstream_connect_failed",
                                   describe(*this, "could not connect to the upstream"));
    case UpstreamErrorKind::bad_response:
      return ApiError::bad_gateway("upstream_bad_response",
                                   describe(*this, "the upstream sent an invalid response"));
    case UpstreamErrorKind::closed_early:
      return ApiError::bad_gateway("upstream_closed_early",
                                   describe(*this, "the upstream closed the connection early"));
    case UpstreamErrorKind::server_error:
      return ApiError::bad_gateway("upstream_server_error", describe(*this, "the upstream failed"));
    case UpstreamErrorKind::connect_timeout:
      return ApiError::gateway_timeout("upstream_connect_timeout",
                                       describe(*this, "connecting to the upstream timed out"));
    case UpstreamErrorKind::ttft_timeout:
      return ApiError::gateway_timeout(
          "upstream_ttft_timeout", describe(*this, "the upstream did not start answering in time"));
    case UpstreamErrorKind::total_timeout:
      return ApiError::gateway_timeout("upstream_timeout",
                                       describe(*this, "the upstream did not finish in time"));
    case UpstreamErrorKind::rate_limited:
      return ApiError{429,
                      "rate_limit_error",
                      "upstream_rate_limited",
                      describe(*this, "the upstream is rate limiting requests"),
                      {}};
    case UpstreamErrorKind::overloaded:
      // Load shedding (a full bulkhead or every member at its limit): a fast 429 the client can
      // back off from (Retry-After), in OpenAI's rate-limit shape.
      return ApiError::too_many_requests("pool_overloaded",
                                         describe(*this, "the pool is at its concurrency limit"));
    case UpstreamErrorKind::client_error:
      return pass_through_client_error(*this);
    case UpstreamErrorKind::auth_failed:
      // The client's key is not the problem, and the upstream's words about the gateway's key
      // are for the operator (logged by the client), not for the caller.
      return ApiError::bad_gateway(
          "upstream_auth_failed",
          describe(*this, "the upstream refused the gateway's credentials", false));
    case UpstreamErrorKind::cancelled:
      return ApiError{499,
                      "client_closed_request",
                      "client_closed_request",
                      describe(*this, "the client closed the request"),
                      {}};
    case UpstreamErrorKind::circuit_open:
      // `message` names the pool (set by CloudPool); no member was called.
      return ApiError::unavailable("upstream_unavailable",
                                   describe(*this, "every upstream's circuit breaker is open"));
  }
  return ApiError::internal(describe(*this, "unknown upstream error"));
}

}  // namespace hengshi::cloud
