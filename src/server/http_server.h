// HttpServer: accepts client connections and runs one coroutine per connection (Beast, C++20
// coroutines) that reads requests top to bottom and hands each to the RequestHandler:
//   - the first byte of a request within idle_timeout_ms (keep-alive), then its headers and body
//     within read_timeout_ms (slowloris gets 408), body size limit (413);
//   - every write bounded by write_timeout_ms, so a client that stops reading is dropped and its
//     upstream work cancelled;
//   - a global and a per-IP connection cap (closed at accept, counted) and max_in_flight
//     requests (a fast 429); EMFILE at accept backs off instead of spinning;
//   - a handler that throws never takes the connection or the process with it: the client gets a
//     500 in OpenAI's shape (or an error event when its stream had started) and the connection
//     closes; the exception is logged and counted.
//
// Graceful shutdown: drain() stops accepting, closes idle keep-alive connections, lets
// in-flight requests finish (their connections close after the response) and completes when
// none is left or the drain timeout passes; close_all() then cancels whatever still runs, so
// every connection coroutine ends and the io_context runs out of work before anything it
// references is destroyed.
//
// Ownership: borrows the io_context and the handler; both must outlive the server, and the
// server must be destroyed before the io_context (its acceptor and sockets belong to it).
// Thread-safety: start()/drain()/close_all() from any thread; the io_context may be run by many
// threads; each connection lives on its own strand.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <string>

#include "core/asio.h"
#include "core/config.h"
#include "core/lazy_deadline.h"
#include "core/result.h"
#include "obs/metrics.h"
#include "server/client_watch.h"
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
  // Cancels every request still in flight (its client_gone token fires, so upstream calls and
  // edge generations stop) and closes every connection. After drain(), this leaves the server
  // with no pending work on the io_context.
  void close_all();
  bool draining() const { return draining_.load(); }
  int in_flight() const { return in_flight_.load(); }
  // Mirrors the admission counter into a gauge (set before start()). The gauge drops after the
  // counter, so a scrape that reads 0 means a new request will be admitted.
  void report_in_flight_to(obs::Gauge* gauge) { in_flight_gauge_ = gauge; }
  int open_connections() const;

 private:
  struct Connection;
  class ReadTimer;
  awaitable<void> accept_loop();
  awaitable<void> serve(std::shared_ptr<Connection> connection);
  awaitable<void> serve_requests(std::shared_ptr<Connection> owner);
  // Admission at accept: false when the global or the peer's connection cap is reached.
  bool admit(const std::shared_ptr<Connection>& connection);
  void forget(const std::shared_ptr<Connection>& connection);
  awaitable<bool> reject_early(tcp::socket& stream, LazyDeadline& deadline, unsigned version,
                               http::status status, std::string body);
  // Answers a failed header/body read when the client can still hear it (413, 408, 400).
  awaitable<void> reject_read_error(tcp::socket& stream, LazyDeadline& deadline, unsigned version,
                                    beast::error_code ec, bool got_bytes);
  // A handler threw: answer what can still be answered (500, or an error event on a stream).
  awaitable<void> answer_exception(HttpExchange& exchange, const std::exception_ptr& failure);
  void check_drained();

  asio::io_context& io_;
  ServerConfig config_;
  RequestHandler& handler_;
  tcp::acceptor acceptor_;
  tcp::endpoint endpoint_;
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  obs::Gauge* in_flight_gauge_ = nullptr;

  mutable std::mutex connections_mutex_;
  std::set<std::shared_ptr<Connection>> connections_;
  std::map<asio::ip::address, int> connections_per_ip_;
  std::function<void(bool)> on_drained_;
  std::unique_ptr<asio::steady_timer> drain_timer_;
  ClientWatchArming watch_arming_;
};

}  // namespace hengshi::server
