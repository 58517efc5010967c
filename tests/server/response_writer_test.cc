// ResponseWriter on a real HttpServer: the one writer of every chat answer and error — JSON or
// SSE in OpenAI's event order, the metadata chunk last, the X-Hengshi-* headers, Retry-After on
// a 429, and an in-band error event once a stream has started.
#include "server/response_writer.h"

#include <gtest/gtest.h>

#include <thread>

#include "server/http_server.h"
#include "support/http_client.h"

namespace hengshi::server {
namespace {

using hengshi::testing::http_call;
using hengshi::testing::HttpRequest;
using nlohmann::json;

ResponseMeta meta_for_test() {
  ResponseMeta meta;
  meta.request_id = "hs-test-1";
  meta.decision.route = Route::cloud_small;
  meta.decision.reason = Reason::default_pool;
  meta.level = 3;
  meta.answered_by = "cloud-large";
  meta.model = "m";
  return meta;
}

// Each target exercises one writer path.
class WriterHandler : public RequestHandler {
 public:
  awaitable<void> handle(HttpExchange& exchange) override {
    const std::string target(exchange.request().target());
    ChatRequest request;
    request.stream = target.find("stream") != std::string::npos;
    request.include_usage = target.find("usage") != std::string::npos;
    ResponseWriter writer(exchange, request, /*expose_figures=*/false);
    ResponseMeta meta = meta_for_test();
    chain::Answer answer;
    answer.content = "hello";
    answer.usage = {5, 2};
    if (target.starts_with("/answer")) {
      co_await writer.write_answer(meta, answer);
    } else if (target == "/pieces-stream") {
      // What the chain does at its commit point: open, pieces, then the end.
      co_await writer.open(meta);
      for (const char* text : {"he", "llo"}) {
        chain::Piece piece{chain::Piece::Kind::text, text};
        co_await writer.send(piece, meta);
      }
      answer.content.clear();
      co_await writer.finish_stream(meta, answer);
    } else if (target == "/burst-stream" || target == "/burst-then-error") {
      // Upstream chunks that arrived together (more = another follows at once), then one that
      // arrived alone; the last is held when the stream ends or fails right after it.
      co_await writer.open(meta);
      const std::vector<std::pair<std::string, bool>> chunks = {
          {R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]})", true},
          {R"({"choices":[{"index":0,"delta":{"content":"b"}}]})", true},
          {R"({"choices":[{"index":0,"delta":{"content":"c"}}]})", false},
          {R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", true}};
      for (const auto& [data, more] : chunks) {
        chain::Piece piece{chain::Piece::Kind::upstream_chunk, data, more};
        co_await writer.send(piece, meta);
      }
      answer.content.clear();
      answer.pieces_carry_finish = true;
      if (target == "/burst-stream") {
        co_await writer.finish_stream(meta, answer);
      } else {
        co_await writer.write_error(ApiError::bad_gateway("upstream_closed_early", "gone"), &meta);
      }
    } else if (target == "/error-429") {
      co_await writer.write_error(ApiError::too_many_requests("pool_overloaded", "busy"), &meta, 2500);
    } else if (target == "/error-mid-stream") {
      co_await writer.open(meta);
      chain::Piece piece{chain::Piece::Kind::text, "par"};
      co_await writer.send(piece, meta);
      co_await writer.write_error(ApiError::bad_gateway("upstream_closed_early", "gone"), &meta);
    }
  }
  void on_protocol_error(int) override {}
};

class ResponseWriterTest : public ::testing::Test {
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
    asio::post(io_, [this] { server_->drain([this](bool) { server_->close_all(); }); });
    thread_.join();
    server_.reset();
  }
  testing::HttpResult get(const std::string& target) {
    return http_call("127.0.0.1", port_, HttpRequest{"GET", target, "", "", {}});
  }
  ServerConfig config_;
  WriterHandler handler_;
  asio::io_context io_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(ResponseWriterTest, AWholeAnswerAsJsonCarriesTheMetadataAndHeaders) {
  auto result = get("/answer");
  ASSERT_EQ(result.status, 200);
  const json body = result.json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["hengshi"]["level"], 3);
  EXPECT_EQ(body["hengshi"]["answered_by"], "cloud-large");
  EXPECT_FALSE(body["hengshi"].contains("figures")) << "figures stay in the log unless exposed";
  EXPECT_EQ(result.header("x-hengshi-level"), "3");
  EXPECT_EQ(result.header("x-hengshi-route"), "cloud-small");
}

TEST_F(ResponseWriterTest, AWholeAnswerAsSseFollowsOpenAisEventOrder) {
  auto result = get("/answer-stream-usage");
  ASSERT_EQ(result.status, 200);
  auto events = result.sse_events();
  ASSERT_EQ(events.size(), 5u) << result.body;  // role, content, finish, usage, metadata; [DONE]
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "hello");
  EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(events[3]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[4]["hengshi"]["request_id"], "hs-test-1");
  EXPECT_EQ(result.sse_data().back(), "[DONE]");
}

TEST_F(ResponseWriterTest, ChunksHeldForTheirFollowersAllGoOutInOrder) {
  auto result = get("/burst-stream");
  auto events = result.sse_events();
  ASSERT_EQ(events.size(), 5u) << result.body;  // a, b, c, finish (held, then sent with the end), metadata
  EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "b");
  EXPECT_EQ(events[2]["choices"][0]["delta"]["content"], "c");
  EXPECT_EQ(events[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(events[4].contains("hengshi"));
  EXPECT_EQ(result.sse_data().back(), "[DONE]");

  auto failed = get("/burst-then-error");
  auto error_events = failed.sse_events();
  ASSERT_EQ(error_events.size(), 5u) << failed.body;  // a, b, c, the held finish chunk, the error
  EXPECT_EQ(error_events[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(error_events[4]["error"]["code"], "upstream_closed_early");
}

TEST_F(ResponseWriterTest, PiecesSentAfterTheCommitPointGetOneRoleChunkAndTheEnd) {
  auto result = get("/pieces-stream");
  auto events = result.sse_events();
  ASSERT_EQ(events.size(), 5u) << result.body;  // role, he, llo, finish, metadata
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "he");
  EXPECT_EQ(events[2]["choices"][0]["delta"]["content"], "llo");
  EXPECT_EQ(events[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(events[4].contains("hengshi"));
}

TEST_F(ResponseWriterTest, A429CarriesRetryAfterInWholeSecondsRoundedUp) {
  auto result = get("/error-429");
  EXPECT_EQ(result.status, 429);
  EXPECT_EQ(result.header("retry-after"), "3");
  EXPECT_EQ(result.json()["error"]["code"], "pool_overloaded");
  EXPECT_EQ(result.json()["hengshi"]["request_id"], "hs-test-1");
  EXPECT_EQ(retry_after_seconds(1), "1");
  EXPECT_EQ(retry_after_seconds(1000), "1");
  EXPECT_EQ(retry_after_seconds(1001), "2");
}

TEST_F(ResponseWriterTest, AnErrorAfterTheStreamStartedIsAnErrorEvent) {
  auto result = get("/error-mid-stream");
  EXPECT_EQ(result.status, 200);
  auto events = result.sse_events();
  ASSERT_FALSE(events.empty()) << result.body;
  EXPECT_EQ(events.back()["error"]["code"], "upstream_closed_early");
  EXPECT_EQ(events.back()["hengshi"]["level"], 3);
}

}  // namespace
}  // namespace hengshi::server
