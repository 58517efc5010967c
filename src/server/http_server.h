// HttpServer: accepts client connections and runs one coroutine per connection (Beast, C++20
// coroutines) that reads requests top to bottom — idle timeout, read timeout, body size limit,
// keep-alive — and hands each request to the RequestHandler.
//
// Graceful shutdown: drain() stops accepting, closes idle keep-alive connections, lets
// in-flight requests finish (their connections close after the response) and completes when
// none is left or the drain timeout passes.
//
// Thread-safety: start()/drain() from any thread; the io_context may be run by many threads;
// each connection lives on its own strand.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "core/asio.h"
#include "core/config.h"
#include "core/result.h"
#include "server/http_exchange.h"

namespace hengshi::server {

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // Must answer through the exchange (send/send_json/stream) before returning.
  virtual awaitable<void> handle(HttpExchange& exchange) = 0;
  // The connection-level errors the handler does not see (body too large, bad HTTP).
  virtual void on_protocol_error(int status) = 0;
};

class HttpServer {
 public:
  HttpServer(asio::io_context& io, const ServerConfig& config, RequestHandler& handler);
  ~HttpServer();

  // Binds and starts accepting; returns the bound endpoint (port 0 resolved).
  Result<tcp::endpoint> start();
  tcp::endpoint endpoint() const { return endpoint_; }

  // Stops accepting and closes idle connections; `done` runs (on the io_context) once every
  // in-flight request has finished or the drain timeout passed.
  void drain(std::function<void(bool clean)> done);
  bool draining() const { return draining_.load(); }
  int in_flight() const { return in_flight_.load(); }
  int open_connections() const;

 private:
  struct Connection;
  awaitable<void> accept_loop();
  awaitable<void> serve(std::shared_ptr<Connection> connection);
  awaitable<bool> reject_early(beast::tcp_stream& stream, http::request_parser<http::string_body>& parser,
                               http::status status, std::string body);
  // Answers a failed header/body read when the client can still hear it (413, 408, 400).
  awaitable<void> reject_read_error(beast::tcp_stream& stream,
                                    http::request_parser<http::string_body>& parser,
                                    beast::error_code ec, bool reading_body);
  void check_drained();

  asio::io_context& io_;
  ServerConfig config_;
  RequestHandler& handler_;
  tcp::acceptor acceptor_;
  tcp::endpoint endpoint_;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};

  mutable std::mutex connections_mutex_;
  std::set<std::shared_ptr<Connection>> connections_;
  std::function<void(bool)> on_drained_;
  std::unique_ptr<asio::steady_timer> drain_timer_;
};

}  // namespace hengshi::server
