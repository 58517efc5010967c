#include "core/parse_buffered.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace hengshi {
namespace {

void append(beast::flat_buffer& buffer, const std::string& text) {
  auto room = buffer.prepare(text.size());
  std::memcpy(room.data(), text.data(), text.size());
  buffer.commit(text.size());
}

const std::string kReply =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\": true}";

TEST(ParseBufferedTest, AWholeMessageIsParsedWithItsBodyAndConsumed) {
  http::response_parser<http::string_body> parser;
  beast::flat_buffer buffer;
  append(buffer, kReply);
  beast::error_code ec;
  parse_buffered(parser, buffer, ec);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_TRUE(parser.is_done());
  EXPECT_EQ(parser.get().body(), "{\"a\": true}");
  EXPECT_EQ(buffer.size(), 0u);
}

// Every split of the message: the parser wants more (no error) until the last byte arrives.
TEST(ParseBufferedTest, AMessageInPiecesWantsMoreUntilItIsWhole) {
  for (std::size_t cut = 1; cut < kReply.size(); ++cut) {
    http::response_parser<http::string_body> parser;
    beast::flat_buffer buffer;
    beast::error_code ec;
    append(buffer, kReply.substr(0, cut));
    parse_buffered(parser, buffer, ec);
    ASSERT_FALSE(ec) << "cut " << cut << ": " << ec.message();
    ASSERT_FALSE(parser.is_done()) << cut;
    append(buffer, kReply.substr(cut));
    parse_buffered(parser, buffer, ec);
    ASSERT_FALSE(ec) << "cut " << cut << ": " << ec.message();
    ASSERT_TRUE(parser.is_done()) << cut;
    EXPECT_EQ(parser.get().body(), "{\"a\": true}") << cut;
    EXPECT_EQ(parser.get()[http::field::content_type], "application/json") << cut;
  }
}

// Pipelined requests: the first is parsed, the second stays in the buffer for the next parser.
TEST(ParseBufferedTest, BytesAfterTheMessageStayForTheNextOne) {
  const std::string first = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  const std::string second = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  beast::flat_buffer buffer;
  append(buffer, first + second);
  beast::error_code ec;
  http::request_parser<http::string_body> one;
  parse_buffered(one, buffer, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(one.is_done());
  EXPECT_EQ(one.get().target(), "/a");
  EXPECT_EQ(one.get().body(), "{}");
  EXPECT_EQ(buffer.size(), second.size());
  http::request_parser<http::string_body> two;
  parse_buffered(two, buffer, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(two.is_done());
  EXPECT_EQ(two.get().target(), "/b");
}

TEST(ParseBufferedTest, MalformedOrOverTheLimitIsAnError) {
  {
    http::response_parser<http::string_body> parser;
    parser.body_limit(4);
    beast::flat_buffer buffer;
    append(buffer, kReply);
    beast::error_code ec;
    parse_buffered(parser, buffer, ec);
    EXPECT_EQ(ec, http::error::body_limit);
  }
  {
    http::response_parser<http::string_body> parser;
    beast::flat_buffer buffer;
    append(buffer, "HTTP/1.1 2x0 OK\r\n\r\n");
    beast::error_code ec;
    parse_buffered(parser, buffer, ec);
    EXPECT_TRUE(ec);
    EXPECT_NE(ec, http::error::need_more);
  }
}

}  // namespace
}  // namespace hengshi
