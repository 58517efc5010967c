// The lean upstream parser keeps only the fields the client reads, and everything Beast derives
// from the others (framing, keep-alive) still works.
#include "cloud/upstream_response_parser.h"

#include <string>

#include <gtest/gtest.h>

namespace hengshi::cloud {
namespace {

namespace http = boost::beast::http;

template <class Parser>
void feed(Parser& parser, const std::string& bytes) {
  boost::beast::error_code ec;
  std::size_t used = parser.put(boost::asio::buffer(bytes), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(used, bytes.size());
}

TEST(UpstreamResponseParserTest, KeepsOnlyTheFieldsTheClientReads) {
  UpstreamResponseParser<http::string_body> parser;
  parser.eager(true);
  feed(parser,
       "HTTP/1.1 429 Too Many Requests\r\nServer: nginx\r\nContent-Type: application/json\r\n"
       "x-ratelimit-remaining-requests: 0\r\nRetry-After: 3\r\nSet-Cookie: a=b\r\n"
       "Connection: close\r\nContent-Length: 2\r\n\r\n{}");
  ASSERT_TRUE(parser.is_done());
  const auto& response = parser.get();
  EXPECT_EQ(response.result_int(), 429u);
  EXPECT_EQ(response[http::field::content_type], "application/json");
  EXPECT_EQ(response[http::field::retry_after], "3");
  EXPECT_EQ(response.find(http::field::server), response.end());
  EXPECT_EQ(response.find("x-ratelimit-remaining-requests"), response.end());
  EXPECT_EQ(response.find(http::field::content_length), response.end());
  EXPECT_FALSE(parser.keep_alive());  // from the parser's state, not the stored fields
  EXPECT_EQ(response.body(), "{}");
}

TEST(UpstreamResponseParserTest, ChunkedBodiesAndKeepAliveStillFollowTheHeaders) {
  UpstreamResponseParser<http::string_body> parser;
  parser.eager(true);
  feed(parser,
       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
       "3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n");
  ASSERT_TRUE(parser.is_done());
  EXPECT_TRUE(parser.chunked());
  EXPECT_TRUE(parser.keep_alive());
  EXPECT_EQ(parser.get().body(), "{\"a\":1}");
  EXPECT_EQ(parser.get().find(http::field::transfer_encoding), parser.get().end());
}

}  // namespace
}  // namespace hengshi::cloud
