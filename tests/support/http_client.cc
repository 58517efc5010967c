#include "support/http_client.h"

#include <algorithm>
#include <stdexcept>

#include "core/asio.h"

namespace hengshi::testing {

std::vector<nlohmann::json> HttpResult::sse_events() const {
  std::vector<nlohmann::json> events;
  for (const auto& payload : sse_data()) {
    if (payload != "[DONE]") events.push_back(nlohmann::json::parse(payload, nullptr, false));
  }
  return events;
}

std::vector<std::string> HttpResult::sse_data() const {
  std::vector<std::string> events;
  std::size_t pos = 0;
  while (pos < body.size()) {
    auto end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    std::string data;
    std::size_t line_start = 0;
    while (line_start <= event.size()) {
      auto line_end = event.find('\n', line_start);
      if (line_end == std::string::npos) line_end = event.size();
      std::string line = event.substr(line_start, line_end - line_start);
      if (line.rfind("data:", 0) == 0) {
        std::string payload = line.substr(5);
        if (!payload.empty() && payload[0] == ' ') payload.erase(0, 1);
        data += (data.empty() ? "" : "\n") + payload;
      }
      line_start = line_end + 1;
    }
    if (!data.empty()) events.push_back(data);
    pos = end + 2;
  }
  return events;
}

struct HttpConnection::Impl {
  asio::io_context io;
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;
  std::chrono::milliseconds timeout;
  std::string host;

  HttpResult read_response() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    stream.expires_after(timeout);
    beast::error_code ec;
    http::read(stream.socket(), buffer, parser, ec);
    if (ec) throw std::runtime_error("reading response failed: " + ec.message());
    auto& response = parser.get();
    HttpResult result;
    result.status = static_cast<int>(response.result_int());
    for (const auto& field : response) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      result.headers[name] = std::string(field.value());
    }
    result.body = response.body();
    result.keep_alive = response.keep_alive();
    return result;
  }
};

HttpConnection::HttpConnection(const std::string& host, int port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  impl_->host = host;
  impl_->stream.expires_after(timeout);
  impl_->stream.connect(tcp::endpoint(asio::ip::make_address(host), static_cast<unsigned short>(port)));
}

HttpConnection::~HttpConnection() = default;

bool HttpConnection::is_open() const { return impl_->stream.socket().is_open(); }

void HttpConnection::close() {
  beast::error_code ec;
  impl_->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  impl_->stream.socket().close(ec);
}

HttpResult HttpConnection::send(const HttpRequest& request) {
  http::request<http::string_body> req{http::string_to_verb(request.method), request.target, 11};
  req.set(http::field::host, impl_->host);
  if (!request.body.empty() || request.method == "POST") {
    if (!request.content_type.empty()) req.set(http::field::content_type, request.content_type);
    req.body() = request.body;
  }
  for (const auto& [name, value] : request.headers) req.set(name, value);
  req.prepare_payload();
  impl_->stream.expires_after(impl_->timeout);
  http::write(impl_->stream.socket(), req);
  return impl_->read_response();
}

HttpResult HttpConnection::send_raw(const std::string& bytes) {
  asio::write(impl_->stream.socket(), asio::buffer(bytes));
  return impl_->read_response();
}

void HttpConnection::send_raw_no_reply(const std::string& bytes) {
  asio::write(impl_->stream.socket(), asio::buffer(bytes));
}

HttpResult HttpConnection::read_response() { return impl_->read_response(); }

void HttpConnection::send_and_close_after_head(const HttpRequest& request) {
  http::request<http::string_body> req{http::string_to_verb(request.method), request.target, 11};
  req.set(http::field::host, impl_->host);
  req.set(http::field::content_type, request.content_type);
  req.body() = request.body;
  req.prepare_payload();
  http::write(impl_->stream.socket(), req);
  http::response_parser<http::string_body> parser;
  beast::error_code ec;
  http::read_header(impl_->stream.socket(), impl_->buffer, parser, ec);
  close();
}

HttpResult http_call(const std::string& host, int port, const HttpRequest& request,
                     std::chrono::milliseconds timeout) {
  HttpConnection connection(host, port, timeout);
  return connection.send(request);
}

}  // namespace hengshi::testing
