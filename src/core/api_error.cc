#include "core/api_error.h"

#include <utility>

#include "core/json_text.h"

namespace hengshi {

nlohmann::json ApiError::to_json() const {
  nlohmann::json error = {{"message", message}, {"type", type}, {"code", code}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  return {{"error", std::move(error)}};
}

std::string ApiError::body() const { return dump_text(to_json()); }

ApiError ApiError::invalid_request(std::string code, std::string message, std::string param) {
  return {400, "invalid_request_error", std::move(code), std::move(message), std::move(param)};
}
ApiError ApiError::not_found(std::string message) {
  return {404, "invalid_request_error", "not_found", std::move(message), {}};
}
ApiError ApiError::method_not_allowed(std::string message) {
  return {405, "invalid_request_error", "method_not_allowed", std::move(message), {}};
}
ApiError ApiError::payload_too_large(std::string message) {
  return {413, "invalid_request_error", "body_too_large", std::move(message), {}};
}
ApiError ApiError::unsupported_media_type(std::string message) {
  return {415, "invalid_request_error", "unsupported_media_type", std::move(message), {}};
}
ApiError ApiError::bad_gateway(std::string code, std::string message) {
  return {502, "upstream_error", std::move(code), std::move(message), {}};
}
ApiError ApiError::gateway_timeout(std::string code, std::string message) {
  return {504, "timeout_error", std::move(code), std::move(message), {}};
}
ApiError ApiError::unavailable(std::string code, std::string message) {
  return {503, "service_unavailable", std::move(code), std::move(message), {}};
}
ApiError ApiError::internal(std::string message) {
  return {500, "internal_error", "internal_error", std::move(message), {}};
}
ApiError ApiError::too_many_requests(std::string code, std::string message) {
  return {429, "rate_limit_error", std::move(code), std::move(message), {}};
}

}  // namespace hengshi
