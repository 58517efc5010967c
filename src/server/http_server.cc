#include "server/http_server.h"

#include <array>
#include <charconv>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/api_error.h"
#include "core/json_text.h"
#include "core/parse_buffered.h"
#include "core/simple_http_head.h"
#include "core/yield_turn.h"
#include "server/server_metrics.h"

namespace hengshi::server {
namespace {

constexpr std::size_t kHeaderLimitBytes = 16 * 1024;
constexpr std::size_t kFirstReadBytes = 4 * 1024;  // the first read of a request
constexpr Millis kAcceptBackoff{100};              // after EMFILE/ENFILE at accept

// A coroutine that ended with an exception nobody caught: log it (never rethrow into Asio,
// which would end the io_context's run()).
void log_escaped(const char* what, const std::exception_ptr& failure) {
  if (!failure) return;
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    spdlog::error("{} ended with an exception: {}", what, e.what());
  } catch (...) {
    spdlog::error("{} ended with an unknown exception", what);
  }
}

Result<tcp::endpoint> parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = -1;
  std::string port_text = listen.substr(colon + 1);
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || port < 0 || port > 65535) {
    return Error{"listen_invalid", "listen address '" + listen + "': bad port"};
  }
  boost::system::error_code addr_ec;
  auto address = asio::ip::make_address(host, addr_ec);
  if (addr_ec) {
    return Error{"listen_invalid", "listen address '" + listen + "': host must be an IP address"};
  }
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

// How long a request waits before its client's socket is watched: a cloud answer takes hundreds
// of milliseconds, so a client that leaves is still noticed early in the call.
constexpr std::chrono::milliseconds kClientWatchDelay{10};

bool is_disconnect(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == beast::error::timeout || ec == asio::error::bad_descriptor ||
         ec == asio::error::broken_pipe || ec == asio::error::not_connected;
}

}  // namespace

struct HttpServer::Connection {
  Connection(tcp::socket accepted, asio::ip::address peer_address, Millis deadline_period)
      : socket(std::move(accepted)),
        deadline(socket.get_executor(), deadline_period, [this] {
          beast::error_code ec;
          socket.close(ec);  // the pending read or write fails, as a tcp_stream's expiry does
        }),
        peer(std::move(peer_address)) {}
  tcp::socket socket;
  LazyDeadline deadline;  // the idle and write timeouts
  asio::ip::address peer;
  // Touched only on the connection's strand:
  bool idle = true;     // waiting for the next request's first byte
  CancelToken current;  // the request in flight's client_gone (shared with its exchange)
  ConnectionMemo memo;  // kept across its keep-alive requests
};

HttpServer::HttpServer(asio::io_context& io, const ServerConfig& config, RequestHandler& handler)
    : io_(io), config_(config), handler_(handler), acceptor_(io), watch_arming_(io, kClientWatchDelay) {}

HttpServer::~HttpServer() = default;

Result<tcp::endpoint> HttpServer::start() {
  auto endpoint = parse_listen(config_.listen);
  if (!endpoint) return endpoint.error();
  boost::system::error_code ec;
  acceptor_.open(endpoint->protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(*endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error{"listen_failed", "cannot listen on " + config_.listen + ": " + ec.message()};
  endpoint_ = acceptor_.local_endpoint();
  asio::co_spawn(io_, accept_loop(), [](const std::exception_ptr& failure) {
    log_escaped("accept loop", failure);
  });
  return endpoint_;
}

bool HttpServer::admit(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(connections_mutex_);
  if (static_cast<int>(connections_.size()) >= config_.max_connections) {
    ServerMetrics::count_connection_rejected("max_connections");
    return false;
  }
  int& from_peer = connections_per_ip_[connection->peer];
  if (from_peer >= config_.max_connections_per_ip) {
    if (from_peer == 0) connections_per_ip_.erase(connection->peer);
    ServerMetrics::count_connection_rejected("max_connections_per_ip");
    return false;
  }
  ++from_peer;
  connections_.insert(connection);
  ServerMetrics::open_connections().inc();
  return true;
}

void HttpServer::forget(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(connections_mutex_);
  if (connections_.erase(connection) == 0) return;
  ServerMetrics::open_connections().dec();
  auto it = connections_per_ip_.find(connection->peer);
  if (it != connections_per_ip_.end() && --it->second <= 0) connections_per_ip_.erase(it);
}

awaitable<void> HttpServer::accept_loop() {
  asio::steady_timer backoff(acceptor_.get_executor());
  while (!draining_) {
    // Each connection gets its own strand so its request, its upstream call and its
    // disconnect watcher never run concurrently. One I/O thread runs nothing concurrently, so
    // the strand's locking and queueing would be pure cost there.
    asio::any_io_executor strand = config_.threads == 1 ? asio::any_io_executor(io_.get_executor())
                                                        : asio::any_io_executor(asio::make_strand(io_));
    beast::error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(strand, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (draining_ || ec == asio::error::operation_aborted) break;
      ServerMetrics::count_accept_error(ec == asio::error::no_descriptors ? "emfile" : "other");
      if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
          ec == asio::error::no_memory || ec.value() == ENFILE) {
        // Out of descriptors: accepting again at once would fail again at once (a busy loop).
        // Wait for connections to close; the kernel keeps the backlog meanwhile.
        spdlog::warn("accept on {}: {}; pausing accepts for {} ms", config_.listen, ec.message(),
                     kAcceptBackoff.count());
        backoff.expires_after(kAcceptBackoff);
        co_await backoff.async_wait(asio::redirect_error(use_awaitable, ec));
      }
      continue;
    }
    auto peer = socket.remote_endpoint(ec);
    if (ec) continue;  // gone already; the socket closes here
    socket.set_option(tcp::no_delay(true), ec);
    // The deadline's timer wakes at most once per the shorter of the two timeouts it keeps.
    auto connection = std::make_shared<Connection>(
        std::move(socket), peer.address(),
        Millis(std::min(config_.idle_timeout_ms, config_.write_timeout_ms)));
    if (!admit(connection)) {
      // Over a cap: close at once. A reset says "go away" without costing us a drain.
      connection->socket.set_option(asio::socket_base::linger(true, 0), ec);
      connection->socket.close(ec);
      continue;
    }
    asio::co_spawn(strand, serve(connection), [](const std::exception_ptr& failure) {
      log_escaped("connection", failure);
    });
  }
}

awaitable<bool> HttpServer::reject_early(tcp::socket& stream, LazyDeadline& deadline,
                                         unsigned version, http::status status, std::string body) {
  handler_.on_protocol_error(static_cast<int>(status));
  Response response{status, version};
  response.set(http::field::server, "hengshi");
  response.set(http::field::content_type, "application/json");
  response.keep_alive(false);  // the rest of this request is unread: the connection can't be reused
  response.body() = std::move(body);
  response.prepare_payload();
  deadline.expires_after(std::chrono::seconds(5));
  beast::error_code ec;
  co_await http::async_write(stream, response, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return false;
  // Lingering close: closing with unread request bytes makes the kernel send RST, which can
  // destroy the error response before the client reads it. Discard what is still coming (bounded).
  stream.shutdown(tcp::socket::shutdown_send, ec);
  deadline.expires_after(std::chrono::seconds(1));
  std::array<char, 16 * 1024> sink;
  std::size_t discarded = 0;
  while (discarded < (4u << 20)) {
    std::size_t n = co_await stream.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
    if (ec) break;
    discarded += n;
  }
  co_return true;
}

awaitable<void> HttpServer::reject_read_error(tcp::socket& stream, LazyDeadline& deadline,
                                              unsigned version, beast::error_code ec,
                                              bool got_bytes) {
  // The answer is built before the one co_await: g++ 12 relocates a braced aggregate temporary
  // inside a co_await expression bitwise, and the copy's empty std::string then frees a pointer
  // into the coroutine frame (ASan: "free on address which was not malloc()-ed").
  std::optional<std::pair<http::status, ApiError>> answer;
  if (ec == http::error::body_limit) {
    // A chunked body can overflow the limit while the headers are still being parsed.
    answer.emplace(http::status::payload_too_large,
                   ApiError::payload_too_large("request body exceeds the limit of " +
                                               std::to_string(config_.max_body_bytes) + " bytes"));
  } else if (ec == http::error::header_limit) {
    answer.emplace(http::status::request_header_fields_too_large,
                   ApiError{431, "invalid_request_error", "headers_too_large",
                            "request headers exceed " + std::to_string(kHeaderLimitBytes) + " bytes", {}});
  } else if (got_bytes && ec == beast::error::timeout) {
    answer.emplace(http::status::request_timeout,
                   ApiError{408, "invalid_request_error", "request_timeout",
                            "the request's headers and body did not arrive within " +
                                std::to_string(config_.read_timeout_ms) + " ms",
                            {}});
  } else if (!is_disconnect(ec) && ec != http::error::partial_message) {
    answer.emplace(http::status::bad_request,
                   ApiError::invalid_request("bad_http", "malformed HTTP request: " + ec.message()));
  }
  // Otherwise (idle timeout, client gone) there is nobody to answer.
  if (answer) {
    std::string body = answer->second.body();
    co_await reject_early(stream, deadline, version, answer->first, std::move(body));
  }
}

// Bounds a request's header + body read: on expiry it cancels the socket's operations (they
// fail with operation_aborted) but leaves the socket open, so a 408 can still be written.
// The timer's callback owns what it touches, so a late callback never sees a freed frame.
class HttpServer::ReadTimer {
 public:
  ReadTimer(const std::shared_ptr<Connection>& owner, Millis timeout)
      : timer_(owner->socket.get_executor()), state_(std::make_shared<State>()) {
    timer_.expires_after(timeout);
    timer_.async_wait([state = state_, owner](const beast::error_code& ec) {
      if (ec || !state->armed) return;
      state->fired = true;
      beast::error_code cancel_ec;
      owner->socket.cancel(cancel_ec);
    });
  }
  ~ReadTimer() { disarm(); }
  ReadTimer(const ReadTimer&) = delete;
  ReadTimer& operator=(const ReadTimer&) = delete;

  bool fired() const { return state_->fired; }
  void disarm() {
    state_->armed = false;
    timer_.cancel();
  }

 private:
  struct State {
    bool armed = true;
    bool fired = false;
  };
  asio::steady_timer timer_;
  std::shared_ptr<State> state_;
};

awaitable<void> HttpServer::serve(std::shared_ptr<Connection> connection) {
  // Runs however serve_requests() ends, also when the io_context is destroyed with this
  // coroutine suspended: the socket closes and the caps are given back.
  struct Release {
    HttpServer* server;
    std::shared_ptr<Connection> connection;
    ~Release() {
      beast::error_code ec;
      connection->socket.shutdown(tcp::socket::shutdown_send, ec);
      connection->socket.close(ec);
      server->forget(connection);
    }
  } release{this, connection};
  try {
    co_await serve_requests(connection);
  } catch (const std::exception& e) {
    // Only the server's own steps are left here (the handler's exceptions are caught per
    // request); nothing can be answered any more.
    spdlog::error("connection from {}: {}", connection->peer.to_string(), e.what());
    ServerMetrics::count_handler_exception();
  }
}

awaitable<void> HttpServer::serve_requests(std::shared_ptr<Connection> owner) {
  Connection& connection = *owner;
  tcp::socket& stream = connection.socket;
  LazyDeadline& deadline = connection.deadline;
  beast::flat_buffer buffer;
  const auto idle_timeout = std::chrono::milliseconds(config_.idle_timeout_ms);
  const auto read_timeout = std::chrono::milliseconds(config_.read_timeout_ms);
  const auto write_timeout = std::chrono::milliseconds(config_.write_timeout_ms);

  while (!draining_) {
    beast::error_code ec;

    // Keep-alive: the next request's first byte may take up to the idle timeout ...
    connection.idle = true;
    if (buffer.size() == 0) {
      deadline.expires_after(idle_timeout);
      co_await yield_turn();  // the client cannot have sent its next request yet (core/yield_turn.h)
      std::size_t n = co_await stream.async_read_some(buffer.prepare(kFirstReadBytes),
                                                      asio::redirect_error(use_awaitable, ec));
      buffer.commit(n);
    }
    connection.idle = false;
    if (ec) break;  // idle timeout, client gone, or drain: nobody to answer
    // What already arrived is parsed at once: a small request usually comes whole with its first
    // read, and then no further read (nor its timer) is needed. The usual request, a plain head
    // whose body came with it, is read without Beast's parser (core/simple_http_head.h); Beast
    // reads anything else, as it comes.
    Request request;
    const std::size_t simple_size = read_simple_request(
        buffered_text(buffer), static_cast<std::uint64_t>(config_.max_body_bytes), request);
    std::optional<http::request_parser<http::string_body>> parser;
    if (simple_size > 0) {
      buffer.consume(simple_size);
    } else {
      parser.emplace();
      parser->header_limit(kHeaderLimitBytes);
      parser->body_limit(static_cast<std::uint64_t>(config_.max_body_bytes));
      parse_buffered(*parser, buffer, ec);
      if (ec) {
        co_await reject_read_error(stream, deadline, parser->get().version(), ec,
                                   /*got_bytes=*/true);
        break;
      }
    }
    // ... else its headers and body must arrive within the read timeout (slowloris: 408). Not
    // the connection's deadline: that closes the socket, and the 408 could not be written.
    deadline.expires_never();
    std::optional<ReadTimer> read_timer;
    if (parser && !parser->is_header_done()) {
      read_timer.emplace(owner, read_timeout);
      co_await http::async_read_header(stream, buffer, *parser,
                                       asio::redirect_error(use_awaitable, ec));
      if (ec) {
        co_await reject_read_error(stream, deadline, parser->get().version(),
                                   read_timer->fired() ? beast::error::timeout : ec,
                                   /*got_bytes=*/true);
        break;
      }
    }

    in_flight_.fetch_add(1);
    if (in_flight_gauge_ != nullptr) in_flight_gauge_->inc();
    struct InFlight {
      HttpServer* server;
      ~InFlight() {
        server->in_flight_.fetch_sub(1);
        if (server->in_flight_gauge_ != nullptr) server->in_flight_gauge_->dec();
        server->check_drained();
      }
    } in_flight_guard{this};

    const unsigned version = parser ? parser->get().version() : request.version();
    if (draining_) {
      co_await reject_early(
          stream, deadline, version, http::status::service_unavailable,
          ApiError::unavailable("shutting_down",
                                "the gateway is shutting down; retry on another instance")
              .body());
      break;
    }
    if (parser) {
      if (auto length = parser->content_length();
          length && *length > static_cast<std::uint64_t>(config_.max_body_bytes)) {
        co_await reject_early(
            stream, deadline, version, http::status::payload_too_large,
            ApiError::payload_too_large("request body of " + std::to_string(*length) +
                                        " bytes exceeds the limit of " +
                                        std::to_string(config_.max_body_bytes) + " bytes")
                .body());
        break;
      }
      if (!parser->is_done()) {
        if (!read_timer) read_timer.emplace(owner, read_timeout);
        co_await http::async_read(stream, buffer, *parser, asio::redirect_error(use_awaitable, ec));
        if (ec) {
          co_await reject_read_error(stream, deadline, version,
                                     read_timer->fired() ? beast::error::timeout : ec,
                                     /*got_bytes=*/true);
          break;
        }
      }
      request = parser->release();
    }
    if (read_timer) read_timer->disarm();
    const auto received_at = Clock::now();

    CancelToken client_gone;
    connection.current = client_gone;
    HttpExchange exchange(stream, deadline, request, received_at, client_gone, write_timeout, connection.memo);

    const int in_flight_now = in_flight_.load();
    exchange.set_under_pressure(in_flight_now > config_.max_in_flight);
    if (in_flight_now > config_.max_in_flight + config_.edge_priority_reserve) {
      // Shed at once, before any work: a fast 429 is cheaper for everyone than a slow queue.
      ServerMetrics::count_request("overloaded", "-", 429);
      Response response{http::status::too_many_requests, request.version()};
      response.set(http::field::content_type, "application/json");
      response.set(http::field::retry_after, "1");
      response.body() = ApiError::too_many_requests(
                            "gateway_overloaded", "the gateway is at server.max_in_flight (" +
                                                      std::to_string(config_.max_in_flight) +
                                                      ") requests; retry shortly")
                            .body();
      if (!co_await exchange.send(std::move(response)) || !exchange.keep_alive()) break;
      continue;
    }

    // Watches the socket while the handler waits: end of stream means the client closed, so
    // upstream work is cancelled (a pipelined next request just ends the watch). Wanted only when
    // the handler is about to wait (HttpExchange::watch_client()), so an answer the gateway gives
    // at once (a cache hit, the intent engine) costs nothing, and armed only when the request
    // still waits a moment later (ClientWatchArming), so a fast upstream's answer costs no
    // syscall either. The watch ends as the answer's last bytes go out, before the client can
    // send its next request.
    auto watch = std::make_shared<ClientWatch>(client_gone, stream, std::weak_ptr<void>(owner));
    // Plain pointers: both callbacks run only inside handle(), while `watch` lives, and two
    // pointers fit std::function's inline buffer (shared_ptr captures cost an allocation each).
    exchange.on_watch_client(
        [watch = watch.get(), this] {
          if (watch->want()) watch_arming_.add(watch->shared_from_this());
        },
        [watch = watch.get()] { watch->end(); });

    std::exception_ptr failure;
    try {
      co_await handler_.handle(exchange);
    } catch (...) {
      failure = std::current_exception();
    }
    if (failure) co_await answer_exception(exchange, failure);

    watch->end();
    connection.current.reset();
    if (!exchange.keep_alive() || exchange.client_gone().cancelled()) break;
  }
}

awaitable<void> HttpServer::answer_exception(HttpExchange& exchange, const std::exception_ptr& failure) {
  ServerMetrics::count_handler_exception();
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  spdlog::error("{} {}: handler failed: {}", std::string(exchange.request().method_string()),
                valid_utf8(to_std(exchange.request().target()).substr(0, 200)), what);
  try {
    co_await exchange.fail(ApiError::internal(
        "the gateway failed while handling this request; the failure was logged"));
  } catch (...) {
    exchange.force_close();  // not even the error could be written: just close
  }
}

int HttpServer::open_connections() const {
  std::lock_guard lock(connections_mutex_);
  return static_cast<int>(connections_.size());
}

void HttpServer::drain(std::function<void(bool clean)> done) {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(connections_mutex_);
    draining_ = true;
    on_drained_ = std::move(done);
    open.assign(connections_.begin(), connections_.end());
  }
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
  for (auto& connection : open) {
    asio::post(connection->socket.get_executor(), [connection] {
      if (connection->idle) {
        beast::error_code ec;
        connection->socket.cancel(ec);
      }
    });
  }
  spdlog::info("{}: draining {} connection(s), {} request(s) in flight", config_.listen, open.size(),
               in_flight_.load());
  drain_timer_ = std::make_unique<asio::steady_timer>(io_, std::chrono::milliseconds(config_.drain_timeout_ms));
  drain_timer_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    std::function<void(bool)> callback;
    {
      std::lock_guard lock(connections_mutex_);
      callback = std::exchange(on_drained_, nullptr);
    }
    if (callback) callback(false);
  });
  check_drained();
}

void HttpServer::close_all() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(connections_mutex_);
    draining_ = true;
    open.assign(connections_.begin(), connections_.end());
  }
  asio::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
  if (drain_timer_) drain_timer_->cancel();
  watch_arming_.stop();
  for (auto& connection : open) {
    asio::post(connection->socket.get_executor(), [connection] {
      connection->current.cancel();  // upstream calls and generations stop
      beast::error_code ec;
      connection->socket.cancel(ec);
      connection->socket.close(ec);
    });
  }
}

void HttpServer::check_drained() {
  if (!draining_ || in_flight_.load() != 0) return;
  std::function<void(bool)> callback;
  {
    std::lock_guard lock(connections_mutex_);
    callback = std::exchange(on_drained_, nullptr);
  }
  if (callback) asio::post(io_, [callback] { callback(true); });
}

}  // namespace hengshi::server
