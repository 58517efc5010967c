// A blocking HTTP/1.1 client for the simulator's tests: one keep-alive connection to 127.0.0.1,
// one request at a time. Reads block, so tests only read where the server is bound to answer.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/asio.h"

namespace hengshi::sim::simtest {

struct Reply {
  beast::error_code error;  // set when the exchange failed (e.g. the server dropped the connection)
  int status = 0;
  std::string body;
  http::response<http::string_body> message;

  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::string header(const char* name) const { return std::string(message[name]); }
};

class TestClient {
 public:
  explicit TestClient(const tcp::endpoint& endpoint) : socket_(io_) { socket_.connect(endpoint); }

  Reply call(http::verb method, const std::string& target, const std::string& body = {}) {
    http::request<http::string_body> request{method, target, 11};
    request.set(http::field::host, "127.0.0.1");
    if (!body.empty()) request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    Reply reply;
    http::write(socket_, request, reply.error);
    if (reply.error) return reply;
    // A parser rather than http::read(message): on error it still gives what arrived.
    http::response_parser<http::string_body> parser;
    http::read(socket_, buffer_, parser, reply.error);
    reply.message = parser.release();
    reply.status = static_cast<int>(reply.message.result_int());
    reply.body = reply.message.body();
    return reply;
  }

  // Sends a request without reading the answer (for requests the server will not answer).
  void send_only(http::verb method, const std::string& target, const std::string& body) {
    http::request<http::string_body> request{method, target, 11};
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    http::write(socket_, request);
  }

  void close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket& socket() { return socket_; }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

// The JSON payloads of an SSE body ("data: ..." events); "[DONE]" is kept as the string.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> payloads;
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) payloads.push_back(event.substr(6));
    pos = end + 2;
  }
  return payloads;
}

}  // namespace hengshi::sim::simtest
