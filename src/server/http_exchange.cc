#include "server/http_exchange.h"

#include <array>
#include <charconv>
#include <string>

#include "core/header_field.h"
#include "core/json_text.h"
#include "core/yield_turn.h"
#include "server/sse.h"

namespace hengshi::server {

namespace {

void append_number(std::string& out, std::size_t value) {
  std::array<char, 24> digits{};
  out.append(digits.data(), std::to_chars(digits.data(), digits.data() + digits.size(), value).ptr);
}

// "HTTP/1.1 200 OK\r\n", as Beast's serializer writes it.
void append_status_line(std::string& head, unsigned version, unsigned status, beast::string_view reason) {
  head += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  append_number(head, status);
  head += ' ';
  head.append(reason.data(), reason.size());
  head += "\r\n";
}

}  // namespace

std::string response_head(const http::response_header<>& response, std::string_view extra_lines) {
  std::string head;
  head.reserve(256);
  append_status_line(head, response.version(), response.result_int(), response.reason());
  for (const auto& field : response) {  // as Beast writes them: "Name: value\r\n"
    const auto name = field.name_string();
    const auto value = field.value();
    head.append(name.data(), name.size());
    head += ": ";
    head.append(value.data(), value.size());
    head += "\r\n";
  }
  head.append(extra_lines);
  head += "\r\n";
  return head;
}

std::string text_response_head(unsigned version, http::status status, std::string_view content_type,
                               std::size_t content_length, bool keep_alive, std::string_view extra_lines) {
  std::string head;
  head.reserve(160 + extra_lines.size());
  append_status_line(head, version, static_cast<unsigned>(status), http::obsolete_reason(status));
  head += "Content-Type: ";
  head.append(content_type);
  head += "\r\n";
  // Beast's keep_alive(): a Connection field only where the version's default differs.
  if (version == 10 && keep_alive) head += "Connection: keep-alive\r\n";
  if (version != 10 && !keep_alive) head += "Connection: close\r\n";
  head += "Server: hengshi\r\nContent-Length: ";
  append_number(head, content_length);
  head += "\r\n";
  head.append(extra_lines);
  head += "\r\n";
  return head;
}

bool HttpExchange::after_write(std::size_t sent, const beast::error_code& ec) {
  bytes_sent_ += sent;
  deadline_.expires_never();
  if (ec) {
    keep_alive_ = false;
    client_gone_.cancel();
  }
  return !ec;
}

void HttpExchange::begin_response(int status) {
  response_started_ = true;
  status_ = status;
  keep_alive_ = keep_alive_ && keep_alive_of(request_);  // not Beast's search of its name tree
}

awaitable<bool> HttpExchange::write_whole(std::string head, std::string body) {
  beast::error_code ec;
  unwatch_client();
  std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
  co_await yield_turn();  // the answer goes out with the other ready ones (core/yield_turn.h)
  std::size_t sent = write_now(stream_, buffers, ec);
  if (write_pending(buffers, sent, ec)) sent += co_await write_rest_in_time(buffers, sent, ec);
  co_return after_write(sent, ec);
}

awaitable<bool> HttpExchange::send(Response response, std::string extra_head_lines) {
  begin_response(static_cast<int>(response.result_int()));
  response.version(request_.version());
  response.keep_alive(keep_alive_);
  response.set(http::field::server, "hengshi");
  response.prepare_payload();
  // prepare_payload() gave the string body a Content-Length (never chunked). The head is written
  // by hand and the body beside it in one gather write: Beast's serializer walks views of views
  // of buffers (cat, prefix, suffix) for every write, a few thousand instructions a response.
  std::string head = response_head(response, extra_head_lines);
  return write_whole(std::move(head), std::move(response.body()));
}

awaitable<bool> HttpExchange::send_text(http::status status, std::string_view content_type, std::string body,
                                        std::string extra_head_lines) {
  begin_response(static_cast<int>(status));
  std::string head =
      text_response_head(request_.version(), status, content_type, body.size(), keep_alive_, extra_head_lines);
  return write_whole(std::move(head), std::move(body));
}

awaitable<bool> HttpExchange::send_json(http::status status, std::string body) {
  Response response{status, request_.version()};
  response.set(http::field::content_type, "application/json");
  response.body() = std::move(body);
  co_return co_await send(std::move(response));
}

awaitable<bool> HttpExchange::start_stream(http::response<http::empty_body> head) {
  begin_response(static_cast<int>(head.result_int()));
  streaming_ = true;
  head.version(request_.version());
  head.keep_alive(keep_alive_);
  head.set(http::field::server, "hengshi");
  head.set(http::field::content_type, "text/event-stream");
  head.set(http::field::cache_control, "no-cache");
  head.chunked(true);
  // Written as text, like a whole answer's head: Beast's serializer and its composed write were
  // about 10k instructions a stream.
  const std::string text = response_head(head);
  const asio::const_buffer buffer = asio::buffer(text);
  beast::error_code ec;
  std::size_t sent = write_now(stream_, buffer, ec);
  if (write_pending(buffer, sent, ec)) sent += co_await write_rest_in_time(buffer, sent, ec);
  co_return after_write(sent, ec);
}

awaitable<bool> HttpExchange::write_chunk(std::string_view data) {
  beast::error_code ec;
  const auto buffers = http::make_chunk(asio::const_buffer(data.data(), data.size()));
  std::size_t sent = write_now(stream_, buffers, ec);
  if (write_pending(buffers, sent, ec)) sent += co_await write_rest_in_time(buffers, sent, ec);
  co_return after_write(sent, ec);
}

awaitable<bool> HttpExchange::finish_stream(std::string_view last_events) {
  stream_finished_ = true;
  beast::error_code ec;
  unwatch_client();
  std::size_t sent = 0;
  if (last_events.empty()) {
    const auto buffers = http::make_chunk_last();
    sent = write_now(stream_, buffers, ec);
    if (write_pending(buffers, sent, ec)) sent += co_await write_rest_in_time(buffers, sent, ec);
  } else {
    const auto buffers =
        beast::buffers_cat(http::make_chunk(asio::const_buffer(last_events.data(), last_events.size())),
                           http::make_chunk_last());
    sent = write_now(stream_, buffers, ec);
    if (write_pending(buffers, sent, ec)) sent += co_await write_rest_in_time(buffers, sent, ec);
  }
  co_return after_write(sent, ec);
}

awaitable<void> HttpExchange::fail(const ApiError& error) {
  force_close();  // before sending: the response says "Connection: close"
  if (!response_started_) {
    co_await send_json(static_cast<http::status>(error.status), error.body());
  } else if (streaming_ && !stream_finished_ && !client_gone_.cancelled()) {
    std::string event = sse_event(error.body());
    if (co_await write_chunk(event)) co_await finish_stream();
  }
}

}  // namespace hengshi::server
