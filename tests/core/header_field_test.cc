#include "core/header_field.h"

#include <gtest/gtest.h>

#include <string>

namespace hengshi {
namespace {

// A request as a client sent it, parsed by Beast as the server parses one.
http::request<http::string_body> parsed_request(const std::string& head) {
  http::request_parser<http::string_body> parser;
  beast::error_code ec;
  parser.put(asio::buffer(head), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_header_done());
  return parser.release();
}

TEST(HeaderFieldTest, ReadsWhatBeastsLookupReads) {
  const auto request = parsed_request(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "AUTHORIZATION: Bearer sk-one\r\ncontent-type: application/json\r\n"
      "X-Hengshi-Session: s-1\r\nAuthorization: Bearer sk-two\r\n\r\n");
  for (http::field name : {http::field::authorization, http::field::content_type, http::field::host,
                           http::field::cache_control}) {
    EXPECT_EQ(field_value(request, name), to_std(request[name])) << http::to_string(name);
  }
  // The name's case does not matter, and of two fields of one name the first counts.
  EXPECT_EQ(field_value(request, http::field::authorization), "Bearer sk-one");
  EXPECT_EQ(field_value(request, http::field::content_type), "application/json");
}

TEST(HeaderFieldTest, AnAbsentFieldIsEmpty) {
  const auto request = parsed_request("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(field_value(request, http::field::authorization).empty());
  EXPECT_TRUE(field_value(request, http::field::cache_control).empty());
}

TEST(HeaderFieldTest, AFieldSetInCodeIsFoundToo) {
  http::request<http::string_body> request;
  request.set(http::field::cache_control, "no-store");
  request.insert("x-custom", "1");
  EXPECT_EQ(field_value(request, http::field::cache_control), "no-store");
}

TEST(HeaderFieldTest, KeepAliveIsWhatBeastsMessageSays) {
  int checked = 0;
  for (const char* version : {"1.0", "1.1"}) {
    for (const std::string fields :
         {"", "Connection: close\r\n", "Connection: keep-alive\r\n", "CONNECTION: Keep-Alive\r\n",
          "Connection: upgrade, Close\r\n", "Connection: foo\r\n", "Connection:\r\n",
          "Connection: keep-alive\r\nConnection: close\r\n",
          "Connection: close\r\nConnection: keep-alive\r\n", "X-Connection: close\r\n",
          "Connection: closed\r\n"}) {
      const auto request = parsed_request("GET / HTTP/" + std::string(version) + "\r\nHost: h\r\n" +
                                          fields + "\r\n");
      EXPECT_EQ(keep_alive_of(request), request.keep_alive()) << version << " " << fields;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 22);
  http::request<http::string_body> made{http::verb::get, "/", 11};
  EXPECT_TRUE(keep_alive_of(made));
  made.keep_alive(false);
  EXPECT_EQ(keep_alive_of(made), made.keep_alive());
  EXPECT_FALSE(keep_alive_of(made));
}

}  // namespace
}  // namespace hengshi
