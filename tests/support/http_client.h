// Blocking HTTP/1.1 client for integration tests (Beast, one connection per call unless a
// Connection object is reused). Every call has a timeout so a hung server fails the test
// instead of hanging it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hengshi::testing {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  bool keep_alive = false;

  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
  // For text/event-stream bodies: the data payloads in order (including "[DONE]").
  std::vector<std::string> sse_data() const;
  // The same payloads parsed as JSON, "[DONE]" left out (a payload that is not JSON is a null).
  std::vector<nlohmann::json> sse_events() const;
};

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";
  std::string body;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
};

class HttpConnection {
 public:
  HttpConnection(const std::string& host, int port,
                 std::chrono::milliseconds timeout = std::chrono::seconds(15));
  ~HttpConnection();
  HttpResult send(const HttpRequest& request);
  // Writes raw bytes (for malformed HTTP) and reads one response, if any.
  HttpResult send_raw(const std::string& bytes);
  // Writes raw bytes and does not wait for a reply.
  void send_raw_no_reply(const std::string& bytes);
  // Reads the next response on the connection (after send_raw_no_reply, e.g. pipelined requests).
  HttpResult read_response();
  // Sends a request, reads only the response head (and whatever body arrives first), then closes.
  void send_and_close_after_head(const HttpRequest& request);
  void close();
  bool is_open() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

HttpResult http_call(const std::string& host, int port, const HttpRequest& request,
                     std::chrono::milliseconds timeout = std::chrono::seconds(15));

}  // namespace hengshi::testing
