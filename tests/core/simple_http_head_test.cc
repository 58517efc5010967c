#include "core/simple_http_head.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/asio.h"
#include "core/parse_buffered.h"

namespace hengshi {
namespace {

using namespace std::string_literals;

constexpr std::uint64_t kLimit = 1 << 20;

// What Beast's response parser makes of `bytes` with the same body limit, read as the upstream
// client reads a buffered reply.
struct BeastReading {
  bool done = false;  // no error, the whole message parsed
  unsigned status = 0;
  bool keep_alive = false;
  std::string body;
  std::size_t consumed = 0;
};

BeastReading read_with_beast(const std::string& bytes, std::uint64_t limit) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(limit);
  beast::flat_buffer buffer;
  auto room = buffer.prepare(bytes.size());
  std::memcpy(room.data(), bytes.data(), bytes.size());
  buffer.commit(bytes.size());
  beast::error_code ec;
  parse_buffered(parser, buffer, ec);
  BeastReading reading;
  reading.done = !ec && parser.is_done();
  if (!reading.done) return reading;
  reading.status = parser.get().result_int();
  reading.keep_alive = parser.keep_alive();
  reading.body = parser.get().body();
  reading.consumed = bytes.size() - buffer.size();
  return reading;
}

// Whatever the fast reader accepts, Beast accepts with the same meaning. Returns whether the fast
// reader accepted.
bool agrees_with_beast(const std::string& bytes, std::uint64_t limit = kLimit) {
  const auto simple = read_simple_reply(bytes, limit);
  if (!simple) return false;
  const BeastReading beast = read_with_beast(bytes, limit);
  EXPECT_TRUE(beast.done) << "Beast refuses what the fast reader took: "
                          << testing::PrintToString(bytes);
  EXPECT_EQ(beast.status, simple->status) << testing::PrintToString(bytes);
  EXPECT_EQ(beast.keep_alive, simple->keep_alive) << testing::PrintToString(bytes);
  EXPECT_EQ(beast.body, simple->body) << testing::PrintToString(bytes);
  EXPECT_EQ(beast.consumed, simple->size) << testing::PrintToString(bytes);
  return true;
}

const std::string kBody =
    R"({"id":"x","choices":[{"message":{"role":"assistant","content":"hi"}}]})";

std::string nginx_reply(const std::string& body = kBody) {
  return "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 06 Dec 2026 08:00:00 GMT\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: keep-alive\r\n\r\n" + body;
}

// A cloud reply's usual head: rate-limit counters, tracing ids, a cookie.
std::string cloud_reply() {
  return "HTTP/1.1 200 OK\r\ndate: Sun, 06 Dec 2026 08:00:00 GMT\r\ncontent-type: "
         "application/json\r\n"
         "content-length: " +
         std::to_string(kBody.size()) +
         "\r\nopenai-processing-ms: 412\r\nx-ratelimit-limit-requests: 10000\r\n"
         "x-ratelimit-remaining-tokens: 1999832\r\nx-request-id: req_8f3c2a\r\n"
         "strict-transport-security: max-age=31536000; includeSubDomains; preload\r\n"
         "set-cookie: __cf_bm=abc.def-1; path=/; expires=Sun, 06-Dec-26 08:30:00 GMT; HttpOnly\r\n"
         "cf-ray: 8f3c2a1b2c3d4e5f-AMS\r\nalt-svc: h3=\":443\"; ma=86400\r\n\r\n" +
         kBody;
}

TEST(SimpleHttpHeadTest, ReadsAUsualReplyAsBeastDoes) {
  for (const std::string& bytes : {nginx_reply(), cloud_reply(), nginx_reply("")}) {
    ASSERT_TRUE(agrees_with_beast(bytes)) << bytes;
  }
  const std::string bytes = cloud_reply();  // the reply's body is a view into it
  const auto reply = read_simple_reply(bytes, kLimit);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200u);
  EXPECT_EQ(reply->body, kBody);
  EXPECT_EQ(reply->size, bytes.size());
  EXPECT_TRUE(reply->keep_alive);
}

TEST(SimpleHttpHeadTest, ConnectionCloseEndsKeepAlive) {
  const std::string bytes =
      "HTTP/1.1 201 Created\r\nCONNECTION: Close\r\nContent-Length: 2\r\n\r\n{}";
  ASSERT_TRUE(agrees_with_beast(bytes));
  EXPECT_FALSE(read_simple_reply(bytes, kLimit)->keep_alive);
}

TEST(SimpleHttpHeadTest, LeavesTheNextMessageInTheBytes) {
  const std::string bytes = nginx_reply() + "HTTP/1.1 200 OK\r\n";
  ASSERT_TRUE(agrees_with_beast(bytes));
  EXPECT_EQ(read_simple_reply(bytes, kLimit)->size, nginx_reply().size());
}

TEST(SimpleHttpHeadTest, LeavesEverythingElseToBeast) {
  const std::string body = "{}";
  const std::vector<std::string> declined = {
      "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",                     // another version
      "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}",  // not a 2xx
      "HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n{}",             // no body by status
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}",          // body to the end
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",  // twice
      "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n{}",                      // body still coming
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",                            // head still coming
      "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\n{}",      // obs-fold
      "HTTP/1.1 200 OK\r\nX-A:\t1\r\nContent-Length: 2\r\n\r\n{}",           // a tab
      "HTTP/1.1 200 OK\r\nX-A: 1 \r\nContent-Length: 2\r\n\r\n{}",           // trailing space
      "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 2\r\n\r\n{}",  // obs-text
      "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\n{}",                        // bare LF
      "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nConnection: keep-alive, Upgrade\r\nContent-Length: 2\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nProxy-Connection: close\r\nContent-Length: 2\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\n{}",
      "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}",
      "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nContent-Length: 2000001\r\n\r\n{}",  // over the limit
  };
  for (const std::string& bytes : declined) {
    EXPECT_FALSE(read_simple_reply(bytes, 2'000'000)) << testing::PrintToString(bytes);
  }
  const std::string long_head = "HTTP/1.1 200 OK\r\nX-Pad: " + std::string(kSimpleHeadLimit, 'a') +
                                "\r\nContent-Length: 2\r\n\r\n{}";
  EXPECT_FALSE(read_simple_reply(long_head, kLimit));
  EXPECT_FALSE(read_simple_reply(nginx_reply(std::string(100, 'x')), 99));
}

// Every one-byte change, insertion, deletion and truncation of `seed`, and a body limit at each
// length, through `agrees` (which checks what the fast reader accepts against Beast and says
// whether it accepted). Not vacuous: most changes to a field's value keep a message in the subset.
template <class Agrees>
void expect_agreement_on_every_one_byte_change(const std::string& seed, Agrees agrees) {
  const std::string replacements = "\r\n \t:,0129aAzZ-_;\"?/\x7f\x80\xff"s + '\0';
  int accepted = 0;
  int changed = 0;
  for (std::size_t at = 0; at < seed.size(); ++at) {
    for (char c : replacements) {
      if (seed[at] == c) continue;
      std::string bytes = seed;
      bytes[at] = c;
      ++changed;
      accepted += agrees(bytes, kLimit) ? 1 : 0;
      bytes.insert(at, 1, c);
      accepted += agrees(bytes, kLimit) ? 1 : 0;
    }
    accepted += agrees(seed.substr(0, at), kLimit) ? 1 : 0;
    accepted += agrees(seed.substr(0, at) + seed.substr(at + 1), kLimit) ? 1 : 0;
    accepted += agrees(seed, at) ? 1 : 0;
  }
  EXPECT_GT(accepted, changed / 4) << seed;
}

TEST(SimpleHttpHeadTest, AgreesWithBeastOnEveryOneByteChange) {
  for (const std::string& seed :
       {nginx_reply(), cloud_reply(),
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"s}) {
    expect_agreement_on_every_one_byte_change(seed, agrees_with_beast);
  }
}

// What Beast's request parser makes of `bytes`, read as the server reads a request (its header
// limit is larger than the fast reader's).
struct BeastRequest {
  bool done = false;
  http::request<http::string_body> message;
  std::size_t consumed = 0;
};

BeastRequest request_with_beast(const std::string& bytes, std::uint64_t limit) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(limit);
  beast::flat_buffer buffer;
  auto room = buffer.prepare(bytes.size());
  std::memcpy(room.data(), bytes.data(), bytes.size());
  buffer.commit(bytes.size());
  beast::error_code ec;
  parse_buffered(parser, buffer, ec);
  BeastRequest reading;
  reading.done = !ec && parser.is_done();
  if (!reading.done) return reading;
  reading.consumed = bytes.size() - buffer.size();
  reading.message = parser.release();
  return reading;
}

bool request_agrees_with_beast(const std::string& bytes, std::uint64_t limit = kLimit) {
  http::request<http::string_body> simple;
  const std::size_t size = read_simple_request(bytes, limit, simple);
  if (size == 0) {
    EXPECT_EQ(simple.begin(), simple.end()) << "declined, yet fields were written";
    return false;
  }
  const std::string shown = testing::PrintToString(bytes);
  const BeastRequest beast = request_with_beast(bytes, limit);
  EXPECT_TRUE(beast.done) << "Beast refuses what the fast reader took: " << shown;
  if (!beast.done) return true;
  EXPECT_EQ(beast.consumed, size) << shown;
  EXPECT_EQ(beast.message.method(), simple.method()) << shown;
  EXPECT_EQ(beast.message.method_string(), simple.method_string()) << shown;
  EXPECT_EQ(beast.message.target(), simple.target()) << shown;
  EXPECT_EQ(beast.message.version(), simple.version()) << shown;
  // The message's keep_alive(), which the server reads (HttpExchange), not the parser's: with two
  // Connection fields Beast's message reads the first and its parser both.
  EXPECT_EQ(beast.message.keep_alive(), simple.keep_alive()) << shown;
  EXPECT_EQ(beast.message.body(), simple.body()) << shown;
  auto b = beast.message.begin();
  auto f = simple.begin();
  for (; b != beast.message.end() && f != simple.end(); ++b, ++f) {
    EXPECT_EQ(b->name(), f->name()) << shown;
    EXPECT_EQ(b->name_string(), f->name_string()) << shown;
    EXPECT_EQ(b->value(), f->value()) << shown;
  }
  EXPECT_TRUE(b == beast.message.end() && f == simple.end()) << "field counts differ: " << shown;
  return true;
}

std::string chat_request(const std::string& body = kBody) {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer "
         "sk-test\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// What the OpenAI SDK for Node sends.
std::string sdk_request() {
  return "POST /v1/chat/completions?x=1 HTTP/1.1\r\naccept: application/json\r\n"
         "content-type: application/json\r\nuser-agent: OpenAI/JS 4.67.3\r\n"
         "x-stainless-lang: js\r\nx-stainless-package-version: 4.67.3\r\nx-stainless-os: Linux\r\n"
         "x-stainless-arch: x64\r\nx-stainless-runtime: node\r\nx-stainless-retry-count: 0\r\n"
         "authorization: Bearer sk-test\r\nX-Hengshi-Task-Type: faq\r\nCache-Control: no-store\r\n"
         "content-length: " +
         std::to_string(kBody.size()) + "\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n" +
         kBody;
}

TEST(SimpleHttpHeadTest, ReadsAUsualRequestAsBeastDoes) {
  for (const std::string& bytes :
       {chat_request(), sdk_request(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"s,
        "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"s}) {
    ASSERT_TRUE(request_agrees_with_beast(bytes)) << bytes;
  }
  http::request<http::string_body> request;
  ASSERT_EQ(read_simple_request(sdk_request() + "POST /next", kLimit, request),
            sdk_request().size());
  EXPECT_EQ(request.method(), http::verb::post);
  EXPECT_EQ(request.target(), "/v1/chat/completions?x=1");
  EXPECT_EQ(request[http::field::authorization], "Bearer sk-test");
  EXPECT_EQ(request["X-HENGSHI-TASK-TYPE"], "faq");
  EXPECT_EQ(request.body(), kBody);
}

TEST(SimpleHttpHeadTest, LeavesAnyOtherRequestToBeast) {
  const std::vector<std::string> declined = {
      "PUT /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
      "POST /v1/chat/completions HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
      "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: "
      "chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 3\r\n\r\n{}",
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2000001\r\n\r\n{}",
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
      "POST /v1/chat/completions HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
      "POST  /v1 HTTP/1.1\r\n\r\n",
      "POST /caf\xc3\xa9 HTTP/1.1\r\n\r\n",
      "POST /v1 HTTP/1.1\r\nX-A:\tb\r\n\r\n",
      "\r\nPOST /v1 HTTP/1.1\r\n\r\n",
  };
  for (const std::string& bytes : declined) {
    http::request<http::string_body> request;
    EXPECT_EQ(read_simple_request(bytes, 2'000'000, request), 0u) << testing::PrintToString(bytes);
    EXPECT_EQ(request.begin(), request.end());
  }
  std::string many = "GET / HTTP/1.1\r\n";
  for (std::size_t k = 0; k <= kSimpleHeadFields; ++k) many += "X-" + std::to_string(k) + ": v\r\n";
  http::request<http::string_body> request;
  EXPECT_EQ(read_simple_request(many + "\r\n", kLimit, request), 0u);
}

TEST(SimpleHttpHeadTest, AgreesWithBeastOnEveryOneByteChangeOfARequest) {
  for (const std::string& seed : {chat_request(), sdk_request()}) {
    expect_agreement_on_every_one_byte_change(seed, request_agrees_with_beast);
  }
}

}  // namespace
}  // namespace hengshi
