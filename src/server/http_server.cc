#include "server/http_server.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <charconv>

#include "core/api_error.h"

namespace hengshi::server {
namespace {

constexpr std::size_t kHeaderLimitBytes = 16 * 1024;

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

bool is_disconnect(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
         ec == beast::error::timeout || ec == asio::error::bad_descriptor ||
         ec == asio::error::broken_pipe || ec == asio::error::not_connected;
}

}  // namespace

struct HttpServer::Connection {
  explicit Connection(tcp::socket socket) : stream(std::move(socket)) {}
  beast::tcp_stream stream;
  bool idle = true;  // waiting for the next request's first bytes; touched only on the strand
};

HttpServer::HttpServer(asio::io_context& io, const ServerConfig& config, RequestHandler& handler)
    : io_(io), config_(config), handler_(handler), acceptor_(io) {}

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
  asio::co_spawn(io_, accept_loop(), asio::detached);
  return endpoint_;
}

awaitable<void> HttpServer::accept_loop() {
  while (!draining_) {
    // Each connection gets its own strand so its request, its upstream call and its
    // disconnect watcher never run concurrently.
    auto strand = asio::make_strand(io_);
    beast::error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(strand, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (draining_ || ec == asio::error::operation_aborted) break;
      continue;  // e.g. EMFILE: keep serving the connections we have
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto connection = std::make_shared<Connection>(std::move(socket));
    {
      std::lock_guard lock(connections_mutex_);
      connections_.insert(connection);
    }
    asio::co_spawn(strand, serve(connection), asio::detached);
  }
}

awaitable<bool> HttpServer::reject_early(beast::tcp_stream& stream,
                                         http::request_parser<http::string_body>& parser,
                                         http::status status, std::string body) {
  handler_.on_protocol_error(static_cast<int>(status));
  Response response{status, parser.get().version()};
  response.set(http::field::server, "hengshi");
  response.set(http::field::content_type, "application/json");
  response.keep_alive(false);  // the rest of this request is unread: the connection can't be reused
  response.body() = std::move(body);
  response.prepare_payload();
  stream.expires_after(std::chrono::seconds(5));
  beast::error_code ec;
  co_await http::async_write(stream, response, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return false;
  // Lingering close: closing with unread request bytes makes the kernel send RST, which can
  // destroy the error response before the client reads it. Discard what is still coming (bounded).
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.expires_after(std::chrono::seconds(1));
  std::array<char, 16 * 1024> sink;
  std::size_t discarded = 0;
  while (discarded < (4u << 20)) {
    std::size_t n = co_await stream.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
    if (ec) break;
    discarded += n;
  }
  co_return true;
}

awaitable<void> HttpServer::reject_read_error(beast::tcp_stream& stream,
                                              http::request_parser<http::string_body>& parser,
                                              beast::error_code ec, bool reading_body) {
  // A chunked body can overflow the limit while the headers are still being parsed.
  if (ec == http::error::body_limit) {
    co_await reject_early(stream, parser, http::status::payload_too_large,
                          ApiError::payload_too_large("request body exceeds the limit of " +
                                                      std::to_string(config_.max_body_bytes) + " bytes")
                              .body());
  } else if (reading_body && ec == beast::error::timeout) {
    co_await reject_early(stream, parser, http::status::request_timeout,
                          ApiError{408, "invalid_request_error", "request_timeout",
                                   "the request body did not arrive within " +
                                       std::to_string(config_.read_timeout_ms) + " ms", {}}
                              .body());
  } else if (!is_disconnect(ec) && ec != http::error::partial_message) {
    co_await reject_early(stream, parser, http::status::bad_request,
                          ApiError::invalid_request("bad_http", "malformed HTTP request: " + ec.message())
                              .body());
  }
  // Otherwise (idle timeout, client gone) there is nobody to answer.
}

awaitable<void> HttpServer::serve(std::shared_ptr<Connection> connection) {
  beast::tcp_stream& stream = connection->stream;
  beast::flat_buffer buffer;
  const auto idle_timeout = std::chrono::milliseconds(config_.idle_timeout_ms);
  const auto read_timeout = std::chrono::milliseconds(config_.read_timeout_ms);

  while (!draining_) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimitBytes);
    parser.body_limit(static_cast<std::uint64_t>(config_.max_body_bytes));

    connection->idle = true;
    stream.expires_after(idle_timeout);
    beast::error_code ec;
    co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    connection->idle = false;
    if (ec) {
      co_await reject_read_error(stream, parser, ec, /*reading_body=*/false);
      break;
    }

    in_flight_.fetch_add(1);
    struct InFlight {
      HttpServer* server;
      ~InFlight() {
        server->in_flight_.fetch_sub(1);
        server->check_drained();
      }
    } in_flight_guard{this};

    if (draining_) {
      co_await reject_early(stream, parser, http::status::service_unavailable,
                            ApiError::unavailable("shutting_down", "the gateway is shutting down; retry on another instance").body());
      break;
    }
    if (auto length = parser.content_length();
        length && *length > static_cast<std::uint64_t>(config_.max_body_bytes)) {
      co_await reject_early(stream, parser, http::status::payload_too_large,
                            ApiError::payload_too_large("request body of " + std::to_string(*length) +
                                                        " bytes exceeds the limit of " +
                                                        std::to_string(config_.max_body_bytes) + " bytes").body());
      break;
    }

    stream.expires_after(read_timeout);
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      co_await reject_read_error(stream, parser, ec, /*reading_body=*/true);
      break;
    }
    const auto received_at = Clock::now();
    stream.expires_never();

    Request request = parser.release();
    HttpExchange exchange(stream, request, received_at);

    // Watches the socket while the handler works: readable with nothing to read means the
    // client closed, so upstream work is cancelled (a pipelined next request just ends the watch).
    auto watching = std::make_shared<bool>(true);
    stream.socket().async_wait(
        tcp::socket::wait_read,
        [watching, &exchange, &stream](const boost::system::error_code& wait_ec) {
          if (!*watching || wait_ec) return;
          // Raw non-blocking peek: Asio's sync receive would poll() forever, blocking this I/O
          // thread, when the readable bytes were already consumed by the time we run.
          char probe = 0;
          ssize_t n = ::recv(stream.socket().native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            exchange.client_gone().cancel();
          }
        });

    co_await handler_.handle(exchange);

    *watching = false;
    beast::error_code cancel_ec;
    stream.socket().cancel(cancel_ec);
    if (!exchange.keep_alive() || exchange.client_gone().cancelled()) break;
  }

  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream.socket().close(ec);
  std::lock_guard lock(connections_mutex_);
  connections_.erase(connection);
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
    asio::post(connection->stream.get_executor(), [connection] {
      if (connection->idle) {
        beast::error_code ec;
        connection->stream.socket().cancel(ec);
      }
    });
  }
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
