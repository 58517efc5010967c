#include "cli/admin_client.h"

#include "core/asio.h"
#include "core/url.h"

namespace hengshi::cli {

Result<AdminReply> admin_call(const std::string& admin, const std::string& method, const std::string& target,
                              const std::string& body, const std::string& token, std::chrono::seconds timeout) {
  auto url = parse_url(admin.find("://") == std::string::npos ? "http://" + admin : admin);
  if (!url) return Error{"invalid_argument", "--admin " + admin + ": " + url.error().message};
  if (url->tls()) return Error{"invalid_argument", "--admin " + admin + ": the admin listener speaks plain http"};
  asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  auto fail = [&](const std::string& what) {
    return Error{"admin_unreachable", what + " " + url->host + ":" + url->port + ": " + ec.message()};
  };
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(url->host, url->port, ec);
  if (ec) return fail("cannot resolve");
  stream.expires_after(timeout);
  stream.connect(endpoints, ec);
  if (ec) return fail("cannot connect to");
  http::request<http::string_body> request{http::string_to_verb(method), url->path + target, 11};
  request.set(http::field::host, url->host);
  request.set(http::field::content_type, "application/json");
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  request.body() = body;
  request.prepare_payload();
  stream.expires_after(timeout);
  http::write(stream, request, ec);
  if (ec) return fail("cannot send to");
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  http::read(stream, buffer, parser, ec);
  if (ec) return fail("no answer from");
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return AdminReply{static_cast<int>(parser.get().result_int()), parser.get().body()};
}

}  // namespace hengshi::cli
