// HttpExchange: one request on a client connection and the ways to answer it — a whole
// response, or a chunked SSE stream. Handlers get one per request; it lives on the connection's
// strand and must not be used after the handler returns.
#pragma once

#include <string>
#include <string_view>

#include "core/asio.h"
#include "core/cancel_token.h"
#include "core/deadline.h"

namespace hengshi::server {

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

class HttpExchange {
 public:
  HttpExchange(beast::tcp_stream& stream, Request& request, Clock::time_point received_at)
      : stream_(stream), request_(request), received_at_(received_at) {}

  const Request& request() const { return request_; }
  Clock::time_point received_at() const { return received_at_; }
  // Fired when the client disconnects while the request is being handled.
  CancelToken& client_gone() { return client_gone_; }

  // Sends a complete response (keep-alive and Content-Length are filled in). False when the
  // client is gone.
  awaitable<bool> send(Response response);
  awaitable<bool> send_json(http::status status, std::string body);

  // Starts a chunked text/event-stream response with the given extra headers already set on
  // `head`; then send_event() per event and finish_stream() once.
  awaitable<bool> start_stream(http::response<http::empty_body> head);
  awaitable<bool> write_chunk(std::string_view data);
  awaitable<bool> finish_stream();

  bool response_started() const { return response_started_; }
  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }
  void force_close() { keep_alive_ = false; }
  std::size_t bytes_sent() const { return bytes_sent_; }

 private:
  beast::tcp_stream& stream_;
  Request& request_;
  Clock::time_point received_at_;
  CancelToken client_gone_;
  bool response_started_ = false;
  bool keep_alive_ = true;
  int status_ = 0;
  std::size_t bytes_sent_ = 0;
};

}  // namespace hengshi::server
