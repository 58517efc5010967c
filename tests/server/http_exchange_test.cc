// The response head hengshi writes by hand must be the bytes Beast's serializer writes, for any
// status, version and set of fields: clients parse it.
#include "server/http_exchange.h"

#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace hengshi::server {
namespace {

std::string beast_head(const Response& response) {
  std::ostringstream out;
  out << response.base();  // Beast's serializer for the header alone
  return out.str();
}

TEST(ResponseHeadTest, IsTheHeadBeastsSerializerWrites) {
  Response ok{http::status::ok, 11};
  ok.set(http::field::content_type, "application/json");
  ok.insert(http::field::unknown, "X-Hengshi-Route", "cloud-small");
  ok.insert(http::field::unknown, "X-Empty", "");
  ok.set(http::field::server, "hengshi");
  ok.body() = R"({"a":1})";
  ok.prepare_payload();
  EXPECT_EQ(response_head(ok), beast_head(ok));
  EXPECT_EQ(response_head(ok).rfind("HTTP/1.1 200 OK\r\n", 0), 0u);

  Response old{http::status::too_many_requests, 10};
  old.keep_alive(false);
  old.set(http::field::retry_after, "3");
  old.prepare_payload();
  EXPECT_EQ(response_head(old), beast_head(old));
  EXPECT_EQ(response_head(old).rfind("HTTP/1.0 429 Too Many Requests\r\n", 0), 0u);

  // The gateway's own lines go after the fields, before the blank line.
  EXPECT_EQ(response_head(ok, "X-Hengshi-Level: 0\r\n"),
            beast_head(ok).substr(0, beast_head(ok).size() - 2) + "X-Hengshi-Level: 0\r\n\r\n");

  // A stream's head (start_stream): no body, chunked, the event-stream fields.
  http::response<http::empty_body> stream{http::status::ok, 11};
  stream.set(http::field::server, "hengshi");
  stream.set(http::field::content_type, "text/event-stream");
  stream.set(http::field::cache_control, "no-cache");
  stream.insert(http::field::unknown, "X-Hengshi-Route", "cloud-small");
  stream.chunked(true);
  std::ostringstream stream_out;
  stream_out << stream.base();
  EXPECT_EQ(response_head(stream), stream_out.str());
  EXPECT_NE(response_head(stream).find("Transfer-Encoding: chunked\r\n"), std::string::npos);

  Response custom{http::status::service_unavailable, 11};
  custom.reason("Offline");
  EXPECT_EQ(response_head(custom), beast_head(custom));
  EXPECT_EQ(response_head(custom).substr(response_head(custom).size() - 4), "\r\n\r\n");
}

// An answer's head is written as text (send_text): it must be the bytes send() writes for the
// same response through Beast's fields, for either version, kept alive or not, any status.
TEST(ResponseHeadTest, TextHeadIsTheHeadSendWritesThroughBeast) {
  for (unsigned version : {10u, 11u}) {
    for (bool keep_alive : {true, false}) {
      for (http::status status : {http::status::ok, http::status::too_many_requests, http::status::bad_gateway}) {
        const std::string body = R"({"id":"x","hengshi":{"level":2}})";
        Response response{status, version};
        response.set(http::field::content_type, "application/json");
        response.keep_alive(keep_alive);  // what send() does, in its order
        response.set(http::field::server, "hengshi");
        response.body() = body;
        response.prepare_payload();
        const std::string extra = "X-Hengshi-Level: 2\r\n";
        EXPECT_EQ(text_response_head(version, status, "application/json", body.size(), keep_alive, extra),
                  response_head(response, extra))
            << version << " " << keep_alive << " " << static_cast<int>(status);
        EXPECT_EQ(text_response_head(version, status, "application/json", body.size(), keep_alive),
                  beast_head(response))
            << version << " " << keep_alive << " " << static_cast<int>(status);
      }
    }
  }
}

}  // namespace
}  // namespace hengshi::server
