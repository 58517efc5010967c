// HttpServer on its own, with handlers that misbehave: a handler that throws never takes the
// connection or the server with it, and the client always learns what happened in OpenAI's
// error shape (a 500, or an error event when its stream had started).
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/http_client.h"
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

}  // namespace
}  // namespace hengshi::server
