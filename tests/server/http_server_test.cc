// HttpServer on its own, with handlers that misbehave: a handler that throws never takes the
// connection or the server with it, and the client always learns what happened in OpenAI's
// error shape (a 500, or an error event when its stream had started).
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <array>
#include <thread>
#include <vector>

#include "support/http_client.h"
#include "support/raw_socket.h"
#include "support/wait_until.h"

namespace hengshi::server {
namespace {

using hengshi::testing::http_call;
using hengshi::testing::HttpRequest;

class ThrowingHandler : public RequestHandler {
 public:
  awaitable<void> handle(HttpExchange& exchange) override {
    const std::string target(exchange.request().target());
    if (target == "/throw-before") throw std::runtime_error("boom before answering");
    if (target == "/throw-mid-stream") {
      http::response<http::empty_body> head{http::status::ok, exchange.request().version()};
      co_await exchange.start_stream(std::move(head));
      std::string first = "data: {\"n\":1}\n\n";
      co_await exchange.write_chunk(first);
      throw std::logic_error("boom mid-stream");
    }
    if (target == "/json-strict") {
      // What strict serialisation of outside bytes used to do on the request path.
      nlohmann::json body = {{"text", std::string("\x80\xff")}};
      std::string text = body.dump();
      co_await exchange.send_json(http::status::ok, std::move(text));
      co_return;
    }
    if (target.starts_with("/echo")) {
      // What the server made of the request, for the tests of its reading.
      const auto& request = exchange.request();
      nlohmann::json echo = {{"method", std::string(request.method_string())},
                             {"target", target},
                             {"x_test", std::string(request["X-Test"])},
                             {"body", request.body()}};
      co_await exchange.send_json(
          http::status::ok, echo.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      co_return;
    }
    co_await exchange.send_json(http::status::ok, std::string(R"({"ok":true})"));
  }
  void on_protocol_error(int) override {}
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.listen = "127.0.0.1:0";
    server_ = std::make_unique<HttpServer>(io_, config_, handler_);
    auto endpoint = server_->start();
    ASSERT_TRUE(endpoint.ok()) << endpoint.error().message;
    port_ = endpoint->port();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    bool drained = false;
    asio::post(io_, [this, &drained] {
      server_->drain([this, &drained](bool) {
        drained = true;
        server_->close_all();
      });
    });
    thread_.join();  // returns once the server left no work behind
    EXPECT_TRUE(drained);
    server_.reset();
  }
  testing::HttpResult get(const std::string& target) {
    return http_call("127.0.0.1", port_, HttpRequest{"GET", target, "", "", {}});
  }

  ServerConfig config_;
  ThrowingHandler handler_;
  asio::io_context io_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(HttpServerTest, AHandlerThatThrowsBeforeAnsweringGetsA500AndTheServerGoesOn) {
  for (const char* target : {"/throw-before", "/json-strict"}) {
    auto result = get(target);
    EXPECT_EQ(result.status, 500) << target;
    auto body = nlohmann::json::parse(result.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << result.body;
    EXPECT_EQ(body["error"]["code"], "internal_error");
    EXPECT_EQ(body["error"]["type"], "internal_error");
    EXPECT_FALSE(result.keep_alive) << "the connection of a failed handler is closed";
  }
  EXPECT_EQ(get("/fine").status, 200);
  EXPECT_TRUE(testing::wait_until([&] { return server_->in_flight() == 0; }));
}

TEST_F(HttpServerTest, AHandlerThatThrowsMidStreamEndsTheStreamWithAnErrorEvent) {
  auto result = get("/throw-mid-stream");
  EXPECT_EQ(result.status, 200);
  auto events = result.sse_data();
  ASSERT_EQ(events.size(), 2u) << result.body;
  EXPECT_EQ(events[0], R"({"n":1})");
  auto error = nlohmann::json::parse(events[1], nullptr, false);
  ASSERT_TRUE(error.is_object()) << events[1];
  EXPECT_EQ(error["error"]["code"], "internal_error");
  EXPECT_EQ(get("/fine").status, 200);
}

// The bodies of the answers in `bytes`, in order (each answer's Content-Length delimits it).
std::vector<nlohmann::json> answer_bodies(const std::string& bytes) {
  std::vector<nlohmann::json> bodies;
  std::size_t at = 0;
  while (true) {
    const std::size_t head_end = bytes.find("\r\n\r\n", at);
    const std::size_t length_at = bytes.find("Content-Length: ", at);
    if (head_end == std::string::npos || length_at == std::string::npos || length_at > head_end)
      break;
    const std::size_t length = std::stoul(bytes.substr(length_at + 16));
    bodies.push_back(nlohmann::json::parse(bytes.substr(head_end + 4, length), nullptr, false));
    at = head_end + 4 + length;
  }
  return bodies;
}

std::string echo_request(const std::string& body, const std::string& extra = "") {
  return "POST /echo HTTP/1.1\r\nHost: x\r\nX-Test: " + body + "\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Requests in one write are each read whole and answered in order, the last one's
// "Connection: close" honoured: the usual request is read without Beast's parser
// (core/simple_http_head.h), which must leave the next request's bytes where they were.
TEST_F(HttpServerTest, RequestsInOneWriteAreAnsweredInOrder) {
  testing::RawSocket socket("127.0.0.1", port_);
  ASSERT_TRUE(socket.send(echo_request("one") + echo_request("two") +
                          echo_request("three", "Connection: close\r\n")));
  const std::string answers = socket.receive(std::chrono::seconds(10));
  const auto bodies = answer_bodies(answers);
  ASSERT_EQ(bodies.size(), 3u) << answers;
  for (std::size_t k = 0; k < 3; ++k) {
    const std::string expected = std::array{"one", "two", "three"}[k];
    EXPECT_EQ(bodies[k]["body"], expected);
    EXPECT_EQ(bodies[k]["x_test"], expected);
    EXPECT_EQ(bodies[k]["target"], "/echo");
  }
  EXPECT_TRUE(socket.closed_by_peer(std::chrono::seconds(5)));
}

// What the fast reader declines is read by Beast as before: a body that arrives after its head,
// a chunked body, a folded field, another method.
TEST_F(HttpServerTest, RequestsOutsideTheUsualShapeAreReadWhole) {
  testing::RawSocket socket("127.0.0.1", port_);
  const std::string later = echo_request("a body that comes later");
  const std::size_t head_end = later.find("\r\n\r\n") + 4;
  ASSERT_TRUE(socket.send(later.substr(0, head_end + 3)));
  ASSERT_TRUE(socket.send(later.substr(head_end + 3)));
  ASSERT_TRUE(
      socket.send("POST /echo/chunked HTTP/1.1\r\nHost: x\r\nX-Test: a\r\n folded\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  ASSERT_TRUE(socket.send(
      "PUT /echo/put HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1\r\n\r\nz"));
  const std::string answers = socket.receive(std::chrono::seconds(10));
  const auto bodies = answer_bodies(answers);
  ASSERT_EQ(bodies.size(), 3u) << answers;
  EXPECT_EQ(bodies[0]["body"], "a body that comes later");
  EXPECT_EQ(bodies[1]["body"], "abcde");
  EXPECT_EQ(bodies[1]["x_test"], "a folded");
  EXPECT_EQ(bodies[2]["method"], "PUT");
  EXPECT_EQ(bodies[2]["body"], "z");
}

}  // namespace
}  // namespace hengshi::server
