// ApiError: an error as the client sees it — an HTTP status plus OpenAI's error object
// {"error": {"message", "type", "code", "param"}}. Every 4xx/5xx the gateway sends is one of these.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hengshi {

struct ApiError {
  int status = 500;
  std::string type;     // OpenAI error type: invalid_request_error, upstream_error, timeout_error, ...
  std::string code;     // stable machine code: invalid_json, body_too_large, upstream_timeout, ...
  std::string message;  // what went wrong and, where possible, how to fix it
  std::string param;    // the offending request field, empty when none

  nlohmann::json to_json() const;
  // Serialised for the wire; text from outside in the message never makes it throw.
  std::string body() const;

  static ApiError invalid_request(std::string code, std::string message, std::string param = {});
  static ApiError not_found(std::string message);
  static ApiError method_not_allowed(std::string message);
  static ApiError payload_too_large(std::string message);
  static ApiError unsupported_media_type(std::string message);
  static ApiError bad_gateway(std::string code, std::string message);
  static ApiError gateway_timeout(std::string code, std::string message);
  static ApiError unavailable(std::string code, std::string message);
  static ApiError internal(std::string message);
  static ApiError too_many_requests(std::string code, std::string message);
};

}  // namespace hengshi
