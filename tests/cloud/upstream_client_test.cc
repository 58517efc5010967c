#include "cloud/upstream_client.h"
#include "core/chat_request.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "cloud/cloud_pool.h"
#include "cloud/fake_upstream.h"
#include "cloud/response_budget.h"
#include "cloud/sse_parser.h"
#include "cloud/tls_context.h"
#include "cloud/test_tls.h"
#include "obs/metrics.h"
#include "support/run_until_done.h"
#include "support/text_checks.h"

namespace hengshi::cloud {
namespace {

using nlohmann::json;
using testing::FakeReply;
using testing::FakeRequest;
using testing::FakeUpstream;
using testing::completion_body;
using namespace std::chrono_literals;

const json kChatRequest = {
    {"model", "cloud-small"},
    {"messages", {{{"role", "user"}, {"content", "hello \"there\"\n"}}}},
    {"temperature", 0.5},
    {"hengshi", {{"task_type", "chat"}}},
};

json stream_request(bool include_usage) {
  json request = kChatRequest;
  request["stream"] = true;
  if (include_usage) request["stream_options"] = {{"include_usage", true}};
  return request;
}

std::string content_chunk(const std::string& text) {
  return json{{"object", "chat.completion.chunk"},
              {"choices", {{{"index", 0}, {"delta", {{"content", text}}}}}}}
      .dump();
}
const std::string kUsageChunk =
    R"({"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}})";

// A flag set from any thread (posted to the strand) and awaited on the strand, with a bound.
class Event {
 public:
  explicit Event(const asio::any_io_executor& executor) : timer_(executor) {}
  void set() {
    set_ = true;
    timer_.cancel();
  }
  awaitable<bool> wait(std::chrono::milliseconds limit = 5s) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (!set_ && std::chrono::steady_clock::now() < until) {
      timer_.expires_at(until);
      beast::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    co_return set_;
  }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

class UpstreamClientTest : public ::testing::Test {
 protected:
  // Runs a coroutine on the strand until the io_context has no more work; returns its value.
  template <class MakeAwaitable>
  auto run(MakeAwaitable make) {
    return hengshi::testing::run_until_done(ioc_, strand_, std::move(make));
  }

  static UpstreamConfig member(const std::string& base_url, const std::string& name) {
    UpstreamConfig config;
    config.name = name;
    config.base_url = base_url;
    config.model = "upstream-model";
    config.connect_timeout_ms = 2000;
    config.ttft_timeout_ms = 5000;
    config.total_timeout_ms = 10000;
    config.max_concurrent = 8;
    return config;
  }

  static std::unique_ptr<UpstreamClient> client(const UpstreamConfig& config,
                                                std::shared_ptr<asio::ssl::context> tls = nullptr) {
    auto url = parse_url(config.base_url);
    EXPECT_TRUE(url.ok());
    return std::make_unique<UpstreamClient>(config, url.value(), std::move(tls), "test-pool");
  }

  awaitable<Result<UpstreamReply, UpstreamError>> complete(UpstreamClient& c,
                                                           Deadline deadline = Deadline::never(),
                                                           CancelToken cancel = {}) {
    co_return co_await c.complete(kChatRequest, deadline, cancel);
  }

  // A stream whose chunks are collected into `chunks`.
  // `request` by value: the coroutine starts after the caller's temporaries are gone.
  awaitable<Result<StreamSummary, UpstreamError>> stream(UpstreamClient& c, json request,
                                                         std::vector<std::string>& chunks,
                                                         std::function<void()> on_chunk = {},
                                                         std::vector<bool>* mores = nullptr) {
    ChunkSink sink = [&chunks, on_chunk, mores](std::string_view chunk, bool more) -> awaitable<bool> {
      chunks.emplace_back(chunk);
      if (mores != nullptr) mores->push_back(more);
      if (on_chunk) on_chunk();
      co_return true;
    };
    co_return co_await c.stream(request, Deadline::never(), CancelToken{}, sink);
  }

  UpstreamError expect_error(const Result<UpstreamReply, UpstreamError>& result) {
    EXPECT_FALSE(result.ok());
    return result.ok() ? UpstreamError{} : result.error();
  }
  UpstreamError expect_error(const Result<StreamSummary, UpstreamError>& result) {
    EXPECT_FALSE(result.ok());
    return result.ok() ? UpstreamError{} : result.error();
  }

  asio::io_context ioc_;  // declared first: clients made in a test die before it
  asio::strand<asio::io_context::executor_type> strand_ = asio::make_strand(ioc_);
};

// A penalised member's score fades while it gets no calls, so the balancer tries it again; the
// next sample blends from where the score faded to, not from the old penalty.
TEST_F(UpstreamClientTest, AnIdleMembersLatencyScoreFades) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "fading"));
  const auto before = std::chrono::steady_clock::now();
  c->add_latency_sample(std::chrono::seconds(10));
  const auto sampled = std::chrono::steady_clock::now();
  EXPECT_NEAR(c->latency_score_us(sampled), 10e6, 1e3);
  // One time constant (10 s) and three later: e^-1 and e^-3 of the penalty remain.
  EXPECT_NEAR(c->latency_score_us(before + std::chrono::seconds(10)), 10e6 * std::exp(-1.0), 2e4);
  EXPECT_NEAR(c->latency_score_us(before + std::chrono::seconds(30)), 10e6 * std::exp(-3.0), 2e4);
  EXPECT_EQ(c->latency_ewma_us(), 10e6) << "the stored average itself is untouched until a sample";
}

TEST_F(UpstreamClientTest, NonStreamRoundTrip) {
  ::setenv("HENGSHI_CLOUD_TEST_KEY", "sk-test-secret", 1);
  FakeUpstream fake;
  auto config = member(fake.base_url(), "roundtrip");
  config.api_key_env = "HENGSHI_CLOUD_TEST_KEY";
  auto c = client(config);

  auto result = run([&] { return complete(*c); });
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->upstream, "roundtrip");
  EXPECT_EQ(result->model, "upstream-model");
  EXPECT_EQ(result->usage.prompt_tokens, 11);
  EXPECT_EQ(result->usage.completion_tokens, 7);
  EXPECT_EQ(result->body.content, "hi") << result->body.raw;
  EXPECT_TRUE(result->body.plain_text);
  EXPECT_GT(result->latency.count(), 0);
  EXPECT_GT(c->latency_ewma_us(), 0.0);
  EXPECT_EQ(c->outstanding(), 0);

  auto requests = fake.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/v1/chat/completions");
  EXPECT_EQ(requests[0].headers["authorization"], "Bearer sk-test-secret");
  EXPECT_EQ(requests[0].headers["content-type"], "application/json");
  EXPECT_EQ(requests[0].headers["host"], "127.0.0.1:" + std::to_string(fake.port()));
  auto sent = json::parse(requests[0].body);
  EXPECT_EQ(sent["model"], "upstream-model");
  EXPECT_EQ(sent["stream"], false);
  EXPECT_EQ(sent["messages"], kChatRequest["messages"]);
  EXPECT_EQ(sent["temperature"], 0.5);
  EXPECT_FALSE(sent.contains("hengshi"));
  EXPECT_FALSE(sent.contains("stream_options"));
}

// A parsed request's members go on as the caller wrote them (its spacing and number forms too);
// the model and stream are the member's, the extension never leaves, and a stream's options are
// the caller's with usage turned on.
TEST_F(UpstreamClientTest, ForwardsAParsedRequestsMembersAsTheCallerWroteThem) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("one"), kUsageChunk};
  fake.set_handler([reply](const FakeRequest& request) {
    return request.body.find(R"("stream":true)") != std::string::npos ? reply : FakeReply{};
  });
  auto c = client(member(fake.base_url(), "as-written"));
  auto request = parse_chat_request(
      R"({"model":"cloud-small","messages":[{"role":"user","content":"hi"}], "temperature": 0.50,)"
      R"("metadata":{"b":1, "a":"x"},"stream_options":{"x":1},"hengshi":{"task_type":"faq"}})");
  ASSERT_TRUE(request.ok()) << request.error().message;
  ASSERT_TRUE(request->forwarded_members.has_value());

  auto answer = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
    co_return co_await c->complete(ForwardBody(*request), Deadline::never(), CancelToken{});
  });
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  // The spliced text needs no DOM: only a stream's merge of stream_options builds it, below.
  EXPECT_EQ(request->body_dom, nullptr);
  std::vector<std::string> chunks;
  auto streamed = run([&]() -> awaitable<Result<StreamSummary, UpstreamError>> {
    ChunkSink sink = [&chunks](std::string_view chunk, bool) -> awaitable<bool> {
      chunks.emplace_back(chunk);
      co_return true;
    };
    co_return co_await c->stream(ForwardBody(*request), Deadline::never(), CancelToken{}, sink);
  });
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;

  const auto requests = fake.requests();
  ASSERT_EQ(requests.size(), 2u);
  const std::string members =
      R"("messages":[{"role":"user","content":"hi"}],"temperature":0.50,"metadata":{"b":1, "a":"x"})";
  EXPECT_EQ(requests[0].body, R"({"model":"upstream-model","stream":false,)" + members + "}");
  EXPECT_EQ(requests[1].body, R"({"model":"upstream-model","stream":true,)" + members +
                                  R"(,"stream_options":{"include_usage":true,"x":1}})");
}

// A body whose text says more than its DOM holds is written from the DOM, what the router
// checked: with a repeated name, the last value, never the first that some upstream parsers read.
TEST_F(UpstreamClientTest, ABodyTheDomDoesNotHoldWholeIsForwardedFromTheDom) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "from-dom"));
  auto request = parse_chat_request(
      R"({"messages":[{"role":"user","content":"call 13800138000","content":"hi"}],"user":"u"})");
  ASSERT_TRUE(request.ok()) << request.error().message;
  auto answer = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
    co_return co_await c->complete(ForwardBody(*request), Deadline::never(), CancelToken{});
  });
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  const std::string sent = fake.requests().at(0).body;
  EXPECT_EQ(sent.find("13800138000"), std::string::npos) << sent;
  EXPECT_EQ(json::parse(sent)["messages"][0]["content"], "hi");

  // A 19-digit number written as a double: what goes on is the DOM's double (the digits the
  // router scanned), never the caller's longer text.
  auto digits = parse_chat_request(
      R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"card":6222021234567890123.0}})");
  ASSERT_TRUE(digits.ok()) << digits.error().message;
  auto second = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
    co_return co_await c->complete(ForwardBody(*digits), Deadline::never(), CancelToken{});
  });
  ASSERT_TRUE(second.ok()) << second.error().message;
  const std::string sent_digits = fake.requests().at(1).body;
  EXPECT_EQ(sent_digits.find("6222021234567890123"), std::string::npos) << sent_digits;
  EXPECT_EQ(json::parse(sent_digits)["metadata"]["card"], digits->body()["metadata"]["card"]);
}

TEST_F(UpstreamClientTest, NoAuthorizationHeaderWithoutAKey) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "nokey"));
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  EXPECT_EQ(fake.requests().at(0).headers.count("authorization"), 0u);
}

TEST_F(UpstreamClientTest, KeepAliveReusesOneConnection) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "keepalive"));
  for (int i = 0; i < 5; ++i) {
    auto result = run([&] { return complete(*c); });
    ASSERT_TRUE(result.ok()) << result.error().message;
  }
  EXPECT_EQ(fake.accepted(), 1);
  EXPECT_EQ(fake.requests().size(), 5u);
  EXPECT_EQ(c->idle_connections(), 1u);
}

// Shutdown: the idle connections close, and a call still finishing after that does not pool its
// connection again (an idle one may hold a pending wait on its call timer).
TEST_F(UpstreamClientTest, AfterCloseIdleNoConnectionIsPooled) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "close-idle"));
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  ASSERT_EQ(c->idle_connections(), 1u);
  c->close_idle();
  EXPECT_EQ(c->idle_connections(), 0u);
  auto result = run([&] { return complete(*c); });
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(fake.accepted(), 2) << "the closed connection is not reused";
  EXPECT_EQ(c->idle_connections(), 0u);
}

// A reply that arrives in pieces is read whole, wherever it is cut: the first read's bytes are
// parsed at once, and the rest (header or body) is read as it comes. The connection stays reusable.
TEST_F(UpstreamClientTest, AReplyArrivingInPiecesIsReadWholeWhereverItIsCut) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "pieces"));
  const std::string body = completion_body("m", "in pieces");
  // "HTTP/1.1 200 Fake\r\nContent-Type: application/json\r\nContent-Length: N\r\n\r\n"
  const std::size_t head = 19 + 32 + 16 + std::to_string(body.size()).size() + 4;
  const std::vector<std::vector<std::size_t>> cuts = {
      {4}, {30}, {head - 2}, {head}, {head + 10}, {4, 30, head, head + 10}};
  std::size_t next = 0;
  fake.set_handler([&](const FakeRequest&) {
    FakeReply reply;
    reply.body = body;
    reply.cut_at = cuts[next++];
    return reply;
  });
  for (std::size_t i = 0; i < cuts.size(); ++i) {
    auto result = run([&] { return complete(*c); });
    ASSERT_TRUE(result.ok()) << "cuts " << i << ": " << result.error().message;
    EXPECT_EQ(result->body.content, "in pieces") << i;
    EXPECT_EQ(result->usage.prompt_tokens, 11) << i;
    EXPECT_EQ(result->usage.completion_tokens, 7) << i;
  }
  EXPECT_EQ(fake.accepted(), 1);
  EXPECT_EQ(c->idle_connections(), 1u);
}

// A reply whose head says "Connection: close" gives its connection up, though the server keeps
// it open: the usual reply is read without Beast's parser (core/simple_http_head.h), which must
// still honour it.
TEST_F(UpstreamClientTest, AReplySayingConnectionCloseIsNotReused) {
  FakeUpstream fake;
  fake.set_handler([&](const FakeRequest&) {
    FakeReply reply;
    reply.headers = {{"Connection", "close"}};
    return reply;
  });
  auto c = client(member(fake.base_url(), "says-close"));
  for (int i = 0; i < 2; ++i) {
    auto result = run([&] { return complete(*c); });
    ASSERT_TRUE(result.ok()) << result.error().message;
  }
  EXPECT_EQ(fake.accepted(), 2);
  EXPECT_EQ(c->idle_connections(), 0u);
}

// A 2xx reply outside the fast reader's subset (a chunked body, a folded field) is read by Beast.
TEST_F(UpstreamClientTest, AChunkedReplyIsReadWhole) {
  FakeUpstream fake;
  const std::string body = completion_body("m", "in chunks");
  fake.set_handler([&](const FakeRequest&) {
    FakeReply reply;
    std::ostringstream chunked;
    chunked << std::hex << 10 << "\r\n"
            << body.substr(0, 10) << "\r\n"
            << body.size() - 10 << "\r\n"
            << body.substr(10) << "\r\n0\r\n\r\n";
    reply.raw =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Folded: a\r\n b\r\n"
        "Transfer-Encoding: chunked\r\n\r\n" +
        chunked.str();
    return reply;
  });
  auto c = client(member(fake.base_url(), "chunked"));
  auto result = run([&] { return complete(*c); });
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result->body.content, "in chunks");
  EXPECT_EQ(result->usage.completion_tokens, 7);
}

TEST_F(UpstreamClientTest, IdleConnectionClosedByTheServerIsNotReused) {
  FakeUpstream fake;
  int served = 0;
  fake.set_handler([&](const FakeRequest&) {
    FakeReply reply;
    reply.close_after = ++served == 1;  // closes without "Connection: close"
    return reply;
  });
  auto c = client(member(fake.base_url(), "closed-idle"));
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  auto second = run([&] { return complete(*c); });
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(fake.accepted(), 2);
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  EXPECT_EQ(fake.accepted(), 2);
}

TEST_F(UpstreamClientTest, ReusedConnectionLostBeforeTheResponseIsRetriedOnAFreshOne) {
  FakeUpstream fake;
  int served = 0;
  fake.set_handler([&](const FakeRequest&) {
    FakeReply reply;
    reply.close_without_reply = ++served == 2;  // the second request hits a dying connection
    return reply;
  });
  auto c = client(member(fake.base_url(), "stale"));
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  auto second = run([&] { return complete(*c); });
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(fake.accepted(), 2);
  EXPECT_EQ(fake.requests().size(), 3u);  // the lost request went again, once
}

TEST_F(UpstreamClientTest, FreshConnectionLostBeforeTheResponseIsClosedEarly) {
  FakeUpstream fake;
  FakeReply reply;
  reply.close_without_reply = true;
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "lost"));
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::closed_early) << error.message;
  EXPECT_FALSE(error.after_first_byte);
  EXPECT_TRUE(error.retryable());
  EXPECT_EQ(fake.requests().size(), 1u);  // no retry on a connection that was not reused
}

TEST_F(UpstreamClientTest, ConnectRefused) {
  // A port bound but never listening refuses connections, and stays ours for the whole test: a
  // port probed and closed could be taken meanwhile by another test's server (ctest -j2).
  tcp::socket held(ioc_);
  held.open(tcp::v4());
  held.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const unsigned short port = held.local_endpoint().port();
  auto c = client(member("http://127.0.0.1:" + std::to_string(port) + "/v1", "refused"));
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::connect_failed) << error.message;
  EXPECT_EQ(error.upstream, "refused");
  EXPECT_TRUE(error.retryable());
  EXPECT_EQ(error.to_api_error().status, 502);
}

TEST_F(UpstreamClientTest, ResolvesHostNames) {
  FakeUpstream fake;
  // "localhost" comes from /etc/hosts: the resolver path runs without network access.
  auto c = client(member("http://localhost:" + std::to_string(fake.port()) + "/v1", "by-name"));
  auto result = run([&] { return complete(*c); });
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(fake.requests().at(0).headers["host"], "localhost:" + std::to_string(fake.port()));
}

TEST_F(UpstreamClientTest, TtftTimeout) {
  FakeUpstream fake;
  FakeReply slow;
  slow.delay = 5s;
  fake.reply_always(slow);
  auto config = member(fake.base_url(), "ttft");
  config.ttft_timeout_ms = 100;
  auto c = client(config);
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::ttft_timeout) << error.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(error.to_api_error().status, 504);
  EXPECT_EQ(c->idle_connections(), 0u);
}

TEST_F(UpstreamClientTest, StreamTtftTimeoutCountsUntilTheFirstEvent) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.gated = true;  // the header goes out, the first event never does
  reply.events = {content_chunk("a")};
  fake.reply_always(reply);
  auto config = member(fake.base_url(), "stream-ttft");
  config.ttft_timeout_ms = 150;
  auto c = client(config);
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::ttft_timeout) << error.message;
  EXPECT_FALSE(error.after_first_byte);
  EXPECT_TRUE(chunks.empty());
}

TEST_F(UpstreamClientTest, TotalTimeoutMidStream) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.gated = true;
  reply.events = {content_chunk("a"), content_chunk("b")};
  fake.reply_always(reply);
  fake.release();  // only the first event is sent
  auto config = member(fake.base_url(), "total");
  config.total_timeout_ms = 300;
  auto c = client(config);
  std::vector<std::string> chunks;
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::total_timeout) << error.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(error.after_first_byte);
  EXPECT_FALSE(error.retryable());
  EXPECT_EQ(chunks.size(), 1u);
}

TEST_F(UpstreamClientTest, RequestDeadlineCapsEveryTimeout) {
  FakeUpstream fake;
  FakeReply slow;
  slow.delay = 5s;
  fake.reply_always(slow);
  auto c = client(member(fake.base_url(), "deadline"));  // ttft 5 s, total 10 s
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return complete(*c, Deadline::after(150ms)); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::total_timeout) << error.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(error.to_api_error().code, "upstream_timeout");
}

// With reuse_call_timers (one I/O thread) a call's limit stays on its connection. A later call's
// limit must still hold, whether it comes before the timer's pending wake-up (the timer is moved
// sooner) or after it (the timer wakes, finds the limit ahead, and sleeps on toward it).
TEST_F(UpstreamClientTest, AReusedCallTimerBoundsASoonerLimit) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "reused-sooner"));  // ttft 5 s: the first wake-up
  c->reuse_call_timers(true);
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  ASSERT_EQ(c->idle_connections(), 1u);
  FakeReply slow;
  slow.delay = 5s;
  fake.reply_always(slow);
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return complete(*c, Deadline::after(150ms)); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::total_timeout) << error.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(fake.accepted(), 1) << "the second call went out on the pooled connection";
  EXPECT_EQ(c->idle_connections(), 0u) << "a connection closed by its limit is not pooled again";
}

TEST_F(UpstreamClientTest, AReusedCallTimerBoundsALaterLimit) {
  FakeUpstream fake;
  auto config = member(fake.base_url(), "reused-later");
  config.ttft_timeout_ms = 300;
  auto c = client(config);
  c->reuse_call_timers(true);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  FakeReply slow;
  slow.delay = 5s;
  fake.reply_always(slow);
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::ttft_timeout) << error.message;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms) << "not the earlier calls' limit";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(fake.accepted(), 1);
  EXPECT_EQ(c->idle_connections(), 0u);
}

TEST_F(UpstreamClientTest, RateLimitedWithRetryAfter) {
  FakeUpstream fake;
  FakeReply reply;
  reply.status = 429;
  reply.body = R"({"error":{"message":"slow down","type":"requests"}})";
  reply.headers = {{"Retry-After", "7"}};
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "limited"));
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::rate_limited);
  EXPECT_EQ(error.http_status, 429);
  ASSERT_TRUE(error.retry_after_ms.has_value());
  EXPECT_EQ(*error.retry_after_ms, 7000);
  EXPECT_TRUE(error.retryable());
  EXPECT_EQ(error.to_api_error().status, 429);
  // The connection is still good for the next call.
  EXPECT_EQ(c->idle_connections(), 1u);
}

TEST_F(UpstreamClientTest, ServerError) {
  FakeUpstream fake;
  FakeReply reply;
  reply.status = 500;
  reply.body = R"({"error":{"message":"boom"}})";
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "broken"));
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::server_error);
  EXPECT_EQ(error.http_status, 500);
  EXPECT_TRUE(error.retryable());
  EXPECT_EQ(error.to_api_error().status, 502);
}

TEST_F(UpstreamClientTest, ClientErrorKeepsTheUpstreamBody) {
  ::setenv("HENGSHI_CLOUD_TEST_KEY", "sk-test-secret", 1);
  FakeUpstream fake;
  FakeReply reply;
  reply.status = 400;
  reply.body =
      R"({"error":{"message":"messages is required","type":"invalid_request_error","code":"missing"}})";
  fake.reply_always(reply);
  auto config = member(fake.base_url(), "rejecting");
  config.api_key_env = "HENGSHI_CLOUD_TEST_KEY";
  auto c = client(config);
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::client_error);
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.upstream_body, reply.body);
  EXPECT_FALSE(error.retryable());
  ApiError api = error.to_api_error();
  EXPECT_EQ(api.status, 400);
  EXPECT_EQ(api.message, "messages is required");
  EXPECT_EQ(api.code, "missing");
  EXPECT_EQ(error.message.find("sk-test-secret"), std::string::npos);
  EXPECT_EQ(api.message.find("sk-test-secret"), std::string::npos);
}

TEST_F(UpstreamClientTest, GarbageIsABadResponse) {
  FakeUpstream fake;
  std::vector<FakeReply> replies(3);
  replies[0].body = "this is not json";
  replies[1].body = R"({"id":"x","object":"chat.completion"})";  // no choices
  replies[2].raw = "SSH-2.0-OpenSSH\r\n\r\n";                    // not HTTP
  std::size_t next = 0;
  fake.set_handler([&](const FakeRequest&) { return replies[next++]; });
  auto c = client(member(fake.base_url(), "garbage"));
  for (std::size_t i = 0; i < replies.size(); ++i) {
    auto error = expect_error(run([&] { return complete(*c); }));
    EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response) << i << ": " << error.message;
    EXPECT_FALSE(error.retryable());
  }
}

TEST_F(UpstreamClientTest, StreamPassesChunksThroughInOrderAndCountsUsage) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("one"), content_chunk("two"), content_chunk("three"), kUsageChunk};
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "streamer"));

  std::vector<std::string> chunks;
  auto summary = run([&] { return stream(*c, stream_request(false), chunks); });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  // The caller did not ask for usage: the usage-only chunk is hidden, yet counted.
  EXPECT_EQ(chunks, (std::vector<std::string>{content_chunk("one"), content_chunk("two"),
                                              content_chunk("three")}));
  EXPECT_EQ(summary->chunks, 3);
  EXPECT_EQ(summary->usage.prompt_tokens, 5);
  EXPECT_EQ(summary->usage.completion_tokens, 3);
  EXPECT_EQ(summary->upstream, "streamer");
  EXPECT_EQ(summary->model, "upstream-model");
  EXPECT_GT(summary->ttft.count(), 0);
  EXPECT_GE(summary->latency, summary->ttft);

  auto sent = json::parse(fake.requests().at(0).body);
  EXPECT_EQ(sent["stream"], true);
  EXPECT_EQ(sent["stream_options"]["include_usage"], true);
  EXPECT_EQ(sent["model"], "upstream-model");

  // A caller that asked for usage gets the usage chunk too.
  chunks.clear();
  summary = run([&] { return stream(*c, stream_request(true), chunks); });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[3], kUsageChunk);
  EXPECT_EQ(summary->usage.completion_tokens, 3);
  // Both streams ran on one kept-alive connection.
  EXPECT_EQ(fake.accepted(), 1);
  EXPECT_EQ(c->idle_connections(), 1u);
}

TEST_F(UpstreamClientTest, StreamDeliversEachChunkBeforeTheNextIsSent) {
  // The server sends event i only after the sink saw event i-1: a client that buffered the
  // stream would stall here until total_timeout.
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.gated = true;
  for (int i = 0; i < 5; ++i) reply.events.push_back(content_chunk(std::to_string(i)));
  fake.reply_always(reply);
  auto config = member(fake.base_url(), "gated");
  config.total_timeout_ms = 3000;
  auto c = client(config);
  fake.release();
  std::vector<std::string> chunks;
  std::vector<bool> mores;
  auto summary =
      run([&] { return stream(*c, stream_request(false), chunks, [&] { fake.release(); }, &mores); });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(chunks.size(), 5u);
  EXPECT_EQ(chunks.back(), content_chunk("4"));
  // Nothing followed any of them without a wait on the network: none may be held back.
  EXPECT_EQ(mores, std::vector<bool>(5, false));
}

TEST_F(UpstreamClientTest, ChunksThatArriveTogetherSayAnotherFollows) {
  // Three events and [DONE] in one write: the sink learns that the first two have company, so a
  // writer can send the three in one write.
  FakeUpstream fake;
  FakeReply reply;
  std::string body;
  for (int i = 0; i < 3; ++i) body += "data: " + content_chunk(std::to_string(i)) + "\n\n";
  body += "data: [DONE]\n\n";
  reply.raw = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body;
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "burst"));
  std::vector<std::string> chunks;
  std::vector<bool> mores;
  auto summary = run([&] { return stream(*c, stream_request(false), chunks, {}, &mores); });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(mores, (std::vector<bool>{true, true, false}));
}

TEST_F(UpstreamClientTest, StreamClosedBeforeDone) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("partial")};
  reply.close_mid_stream = true;
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "truncated"));
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::closed_early) << error.message;
  EXPECT_TRUE(error.after_first_byte);
  EXPECT_FALSE(error.retryable());
  EXPECT_EQ(chunks.size(), 1u);
}

TEST_F(UpstreamClientTest, StreamEndingWithoutDoneIsClosedEarly) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("x")};
  reply.send_done = false;
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "nodone"));
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::closed_early) << error.message;
}

TEST_F(UpstreamClientTest, StreamWithNonJsonChunkIsABadResponse) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("ok"), "{not json"};
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "badchunk"));
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response) << error.message;
  EXPECT_EQ(chunks.size(), 1u);
}

TEST_F(UpstreamClientTest, StreamErrorStatusIsClassifiedWithItsBody) {
  FakeUpstream fake;
  FakeReply reply;
  reply.status = 422;
  reply.body = R"({"error":{"message":"bad tool","type":"invalid_request_error"}})";
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "stream-422"));
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::client_error);
  EXPECT_EQ(error.to_api_error().status, 422);
  EXPECT_EQ(error.to_api_error().message, "bad tool");
  EXPECT_TRUE(chunks.empty());
}

TEST_F(UpstreamClientTest, SinkReturningFalseStopsTheStream) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("a"), content_chunk("b"), content_chunk("c")};
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "sink-stop"));
  int seen = 0;
  ChunkSink sink = [&](std::string_view, bool) -> awaitable<bool> { co_return ++seen < 1; };
  auto error = expect_error(run([&]() -> awaitable<Result<StreamSummary, UpstreamError>> {
    co_return co_await c->stream(stream_request(false), Deadline::never(), CancelToken{}, sink);
  }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::cancelled);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(c->idle_connections(), 0u);  // that connection is not reused
}

TEST_F(UpstreamClientTest, CancellationClosesTheConnection) {
  FakeUpstream fake;
  CancelToken cancel;
  fake.set_handler([&](const FakeRequest&) {
    asio::post(strand_, [&] { cancel.cancel(); });
    FakeReply reply;
    reply.hang = true;
    return reply;
  });
  auto c = client(member(fake.base_url(), "cancelled"));
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return complete(*c, Deadline::never(), cancel); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::cancelled) << error.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(error.to_api_error().status, 499);
  EXPECT_FALSE(error.retryable());
  EXPECT_TRUE(fake.wait_for_disconnects(1, 5s));
  EXPECT_EQ(c->outstanding(), 0);
}

TEST_F(UpstreamClientTest, AlreadyCancelledTokenSendsNothing) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url(), "precancelled"));
  CancelToken cancel;
  cancel.cancel();
  auto error = expect_error(run([&] { return complete(*c, Deadline::never(), cancel); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::cancelled);
  EXPECT_EQ(fake.accepted(), 0);
}

TEST_F(UpstreamClientTest, MaxConcurrentRefusesTheCallOverTheLimit) {
  FakeUpstream fake;
  auto config = member(fake.base_url(), "one-at-a-time");
  config.max_concurrent = 1;
  auto c = client(config);
  CancelToken cancel;
  Event arrived(strand_);
  fake.set_handler([&](const FakeRequest&) {
    asio::post(strand_, [&] { arrived.set(); });
    FakeReply reply;
    reply.hang = true;
    return reply;
  });
  std::optional<Result<UpstreamReply, UpstreamError>> first;
  auto second = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
    asio::co_spawn(
        strand_,
        [&]() -> awaitable<void> {
          first.emplace(co_await complete(*c, Deadline::never(), cancel));
        },
        asio::detached);
    EXPECT_TRUE(co_await arrived.wait());
    EXPECT_EQ(c->outstanding(), 1);
    auto refused = co_await complete(*c);
    cancel.cancel();
    co_return refused;
  });
  auto error = expect_error(second);
  EXPECT_EQ(error.kind, UpstreamErrorKind::overloaded);
  EXPECT_EQ(error.to_api_error().status, 429);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(expect_error(*first).kind, UpstreamErrorKind::cancelled);
  EXPECT_EQ(fake.requests().size(), 1u);
  EXPECT_EQ(c->outstanding(), 0);
}

TEST_F(UpstreamClientTest, MetricsCountOutcomes) {
  auto& registry = obs::Registry::global();
  const obs::Labels member_labels = {{"pool", "test-pool"}, {"upstream", "metered"}};
  auto counter = [&](const char* outcome) {
    obs::Labels labels = member_labels;
    labels.emplace_back("outcome", outcome);
    return registry.counter("hengshi_upstream_requests_total", "", labels).value();
  };
  auto latency_count = [&] {
    return registry.histogram("hengshi_upstream_latency_seconds", "", member_labels).count();
  };
  // The registry is process-wide (and tests may repeat): compare against the values before.
  double ok_before = counter("ok");
  double server_error_before = counter("server_error");
  auto latency_before = latency_count();

  FakeUpstream fake;
  std::vector<FakeReply> replies(2);
  replies[1].status = 503;
  std::size_t next = 0;
  fake.set_handler([&](const FakeRequest&) { return replies[next++]; });
  auto c = client(member(fake.base_url(), "metered"));
  ASSERT_TRUE(run([&] { return complete(*c); }).ok());
  EXPECT_FALSE(run([&] { return complete(*c); }).ok());

  EXPECT_EQ(counter("ok") - ok_before, 1.0);
  EXPECT_EQ(counter("server_error") - server_error_before, 1.0);
  EXPECT_EQ(latency_count() - latency_before, 1u);
  EXPECT_EQ(registry.gauge("hengshi_upstream_outstanding", "", member_labels).value(), 0.0);
}

// --- CloudPool over real clients -------------------------------------------------------------

TEST_F(UpstreamClientTest, PoolDelegatesToAMember) {
  FakeUpstream fake;
  PoolConfig config;
  config.name = "cloud-small";
  config.members = {member(fake.base_url(), "only")};
  auto pool = CloudPool::create(config, nullptr);
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  auto reply = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
    co_return co_await (*pool)->complete(kChatRequest, Deadline::never(), CancelToken{});
  });
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->upstream, "only");
  EXPECT_EQ((*pool)->members().at(0)->name(), "only");
}

TEST_F(UpstreamClientTest, PoolRefusesAMemberWithoutAName) {
  PoolConfig config;
  config.name = "cloud-small";
  config.members = {member("http://127.0.0.1:1/v1", "")};  // never named after its URL
  auto pool = CloudPool::create(config, nullptr);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.error().message.find("name is required"), std::string::npos)
      << pool.error().message;
}

TEST_F(UpstreamClientTest, PoolRefusesAnApiKeyEnvThatIsUnsetOrEmpty) {
  PoolConfig config;
  config.name = "cloud-large";
  auto keyed = member("http://127.0.0.1:1/v1", "keyed");
  keyed.api_key_env = "HENGSHI_CLOUD_TEST_UNSET_KEY";
  config.members = {keyed};
  ::unsetenv("HENGSHI_CLOUD_TEST_UNSET_KEY");
  auto unset = CloudPool::create(config, nullptr);
  ASSERT_FALSE(unset.ok());
  for (const char* part : {"cloud-large", "keyed", "HENGSHI_CLOUD_TEST_UNSET_KEY", "not set"}) {
    EXPECT_NE(unset.error().message.find(part), std::string::npos) << unset.error().message;
  }
  ::setenv("HENGSHI_CLOUD_TEST_UNSET_KEY", "  \t", 1);
  auto empty = CloudPool::create(config, nullptr);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("is empty"), std::string::npos) << empty.error().message;
  ::setenv("HENGSHI_CLOUD_TEST_UNSET_KEY", "sk-value-never-quoted\x01", 1);
  auto unsafe = CloudPool::create(config, nullptr);
  ASSERT_FALSE(unsafe.ok());
  EXPECT_EQ(unsafe.error().message.find("sk-value-never-quoted"), std::string::npos);
  ::setenv("HENGSHI_CLOUD_TEST_UNSET_KEY", "sk-fine", 1);
  EXPECT_TRUE(CloudPool::create(config, nullptr).ok());
  ::unsetenv("HENGSHI_CLOUD_TEST_UNSET_KEY");
}

TEST_F(UpstreamClientTest, PoolWithEveryMemberFullIsOverloaded) {
  FakeUpstream fake;
  PoolConfig config;
  config.name = "tiny";
  auto one = member(fake.base_url(), "only");
  one.max_concurrent = 1;
  config.members = {one};
  auto pool = CloudPool::create(config, nullptr);
  ASSERT_TRUE(pool.ok());
  CancelToken cancel;
  Event arrived(strand_);
  fake.set_handler([&](const FakeRequest&) {
    asio::post(strand_, [&] { arrived.set(); });
    FakeReply reply;
    reply.hang = true;
    return reply;
  });
  auto refused = run([&]() -> awaitable<Result<StreamSummary, UpstreamError>> {
    asio::co_spawn(
        strand_,
        [&]() -> awaitable<void> {
          auto ignored = co_await (*pool)->complete(kChatRequest, Deadline::never(), cancel);
        },
        asio::detached);
    EXPECT_TRUE(co_await arrived.wait());
    ChunkSink sink = [](std::string_view, bool) -> awaitable<bool> { co_return true; };
    auto result = co_await (*pool)->stream(stream_request(false), Deadline::never(), {}, sink);
    cancel.cancel();
    co_return result;
  });
  EXPECT_EQ(expect_error(refused).kind, UpstreamErrorKind::overloaded);
}

TEST_F(UpstreamClientTest, PoolRejectsABadUrl) {
  PoolConfig config;
  config.name = "broken";
  config.members = {member("ftp://example.com", "ftp")};
  auto pool = CloudPool::create(config, nullptr);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.error().message.find("ftp"), std::string::npos);
}

TEST_F(UpstreamClientTest, PoolRejectsAMissingCaFile) {
  PoolConfig config;
  config.name = "private";
  auto secure = member("https://127.0.0.1:1/v1", "private-ca");
  secure.ca_file = "/nonexistent/ca.pem";
  config.members = {secure};
  auto pool = CloudPool::create(config, nullptr);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.error().message.find("/nonexistent/ca.pem"), std::string::npos);
}

// --- Hygiene: auth failures, invalid UTF-8 ---------------------------------------------------

// Captures what spdlog's default logger writes while alive.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

using hengshi::testing::dumps_strictly;  // support/text_checks.h

TEST_F(UpstreamClientTest, UpstreamAuthFailureIsA502WithItsMessageOnlyInTheLog) {
  FakeUpstream fake;
  const std::string upstream_words = "Incorrect API key provided: sk-ab***yz";
  int status = 401;
  fake.set_handler([&](const FakeRequest&) {
    FakeReply reply;
    reply.status = status;
    reply.body = R"({"error":{"message":")" + upstream_words + R"(","code":"invalid_api_key"}})";
    return reply;
  });
  PoolConfig config;
  config.name = "cloud-small";
  config.members = {member(fake.base_url(), "auth-member")};
  auto pool = CloudPool::create(config, nullptr);
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  for (bool streaming : {false, true}) {
    for (int code : {401, 403}) {
      status = code;
      LogCapture log;
      UpstreamError error;
      if (streaming) {
        std::vector<std::string> chunks;
        UpstreamClient& only = *(*pool)->members()[0];
        error = expect_error(run([&] { return stream(only, stream_request(false), chunks); }));
      } else {
        error = expect_error(run([&] { return complete(*(*pool)->members()[0]); }));
      }
      EXPECT_EQ(error.kind, UpstreamErrorKind::auth_failed) << error.message;
      EXPECT_EQ(error.http_status, code);
      EXPECT_FALSE(error.retryable());
      ApiError api = error.to_api_error();
      EXPECT_EQ(api.status, 502);
      EXPECT_EQ(api.code, "upstream_auth_failed");
      EXPECT_EQ(api.message.find("Incorrect"), std::string::npos) << api.message;
      EXPECT_EQ(error.message.find("Incorrect"), std::string::npos) << error.message;
      EXPECT_TRUE(error.upstream_body.empty());
      std::string logged = log.text();
      EXPECT_NE(logged.find("cloud-small"), std::string::npos) << logged;
      EXPECT_NE(logged.find("auth-member"), std::string::npos) << logged;
      EXPECT_NE(logged.find(std::to_string(code)), std::string::npos) << logged;
      EXPECT_NE(logged.find(upstream_words), std::string::npos) << logged;
    }
  }
}

TEST_F(UpstreamClientTest, InvalidUtf8FromTheUpstreamNeverReachesAMessage) {
  FakeUpstream fake;
  // A long multi-byte body, so the snippet cut lands inside a character, then broken bytes.
  std::string cut_mid_character;
  for (int i = 0; i < 150; ++i) cut_mid_character += "\xE4\xBD\xA0";
  cut_mid_character += "\xE5\xA5";
  std::vector<FakeReply> replies(5);
  replies[0].status = 400;
  replies[0].body = "\xFF\xFEnot json \xC3";
  replies[1].status = 500;
  replies[1].body = cut_mid_character;
  replies[2].body = cut_mid_character;  // 200 but not JSON
  replies[3].status = 401;
  replies[3].body = cut_mid_character;
  replies[4].stream = true;
  replies[4].events = {"{\"choices\":[{\"delta\":{\"content\":\"\xFF\xE4\xBD\"}}]}"};
  std::size_t next = 0;
  fake.set_handler([&](const FakeRequest&) { return replies[next++]; });
  auto c = client(member(fake.base_url(), "broken-utf8"));
  LogCapture log;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    UpstreamError error;
    if (replies[i].stream) {
      std::vector<std::string> chunks;
      error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
      EXPECT_TRUE(chunks.empty());
      EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response);
    } else {
      error = expect_error(run([&] { return complete(*c); }));
    }
    EXPECT_TRUE(dumps_strictly(error.message)) << i;
    EXPECT_TRUE(dumps_strictly(error.to_api_error().message)) << i;
    EXPECT_LE(error.message.size(), 300u) << i;
  }
  EXPECT_TRUE(dumps_strictly(log.text()));
}

// --- Response bounds -----------------------------------------------------------------------

TEST_F(UpstreamClientTest, NonStreamBodyOverMaxResponseBytesIsABadResponse) {
  FakeUpstream fake;
  auto config = member(fake.base_url(), "big-body");
  config.max_response_bytes = 4096;
  auto c = client(config);
  std::vector<FakeReply> replies(3);
  replies[0].body = completion_body("m", std::string(5000, 'a'));  // Content-Length over it
  // Chunked, no Content-Length: caught as it grows.
  std::string chunked_body = completion_body("m", std::string(6000, 'b'));
  char size[32];
  std::snprintf(size, sizeof size, "%zx", chunked_body.size());
  replies[1].raw = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                   "chunked\r\n\r\n" + std::string(size) + "\r\n" + chunked_body + "\r\n0\r\n\r\n";
  replies[2].body = completion_body("m", std::string(1000, 'c'));  // under: fine
  std::size_t next = 0;
  fake.set_handler([&](const FakeRequest&) { return replies[next++]; });
  for (int i = 0; i < 2; ++i) {
    auto error = expect_error(run([&] { return complete(*c); }));
    EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response) << i;
    EXPECT_NE(error.message.find("max_response_bytes (4096"), std::string::npos) << error.message;
  }
  auto ok = run([&] { return complete(*c); });
  ASSERT_TRUE(ok.ok()) << ok.error().message;
}

TEST_F(UpstreamClientTest, ErrorBodyOverMaxResponseBytesIsNotKept) {
  FakeUpstream fake;
  FakeReply reply;
  reply.status = 400;
  reply.body = std::string(10000, 'e');
  fake.reply_always(reply);
  auto config = member(fake.base_url(), "big-error");
  config.max_response_bytes = 4096;
  auto c = client(config);
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response) << error.message;
  std::vector<std::string> chunks;
  auto streamed = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(streamed.kind, UpstreamErrorKind::client_error) << streamed.message;
  EXPECT_TRUE(streamed.upstream_body.empty());
}

TEST_F(UpstreamClientTest, StreamLongerThanMaxStreamBytesIsCut) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  for (int i = 0; i < 200; ++i) reply.events.push_back(content_chunk(std::string(100, 'x')));
  fake.reply_always(reply);
  auto config = member(fake.base_url(), "long-stream");
  config.max_stream_bytes = 4000;
  auto c = client(config);
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response) << error.message;
  EXPECT_NE(error.message.find("max_stream_bytes"), std::string::npos) << error.message;
  EXPECT_LT(chunks.size(), 200u);
}

TEST_F(UpstreamClientTest, StreamEventOverTheSseLimitIsABadResponse) {
  FakeUpstream fake;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("before"),
                  content_chunk(std::string(kDefaultMaxSseEventBytes + 10, 'z'))};
  fake.reply_always(reply);
  auto c = client(member(fake.base_url(), "huge-event"));
  std::vector<std::string> chunks;
  auto error = expect_error(run([&] { return stream(*c, stream_request(false), chunks); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::bad_response) << error.message;
  EXPECT_NE(error.message.find("longer than"), std::string::npos) << error.message;
  EXPECT_EQ(chunks, std::vector<std::string>{content_chunk("before")});
}

TEST(ResponseBudgetTest, ReservationsShareTheCapAndGiveBackOnDestruction) {
  obs::Registry registry;
  ResponseBudget budget(1000, registry);
  {
    ResponseBudget::Reservation a(&budget);
    ResponseBudget::Reservation b(&budget);
    EXPECT_TRUE(a.grow_to(600));
    EXPECT_TRUE(a.grow_to(500));  // never shrinks
    EXPECT_EQ(a.bytes(), 600);
    EXPECT_FALSE(b.grow_to(500));
    EXPECT_EQ(b.bytes(), 0);
    EXPECT_TRUE(b.grow_to(400));
    EXPECT_EQ(budget.in_use(), 1000);
    a.release();
    EXPECT_TRUE(b.grow_to(900));
  }
  EXPECT_EQ(budget.in_use(), 0);
  ResponseBudget::Reservation unbounded;
  EXPECT_TRUE(unbounded.grow_to(std::int64_t{1} << 40));
}

TEST_F(UpstreamClientTest, CallOverTheGlobalResponseBudgetFailsFastAsOverloaded) {
  FakeUpstream fake;
  FakeReply big;
  big.body = completion_body("m", std::string(5000, 'a'));
  fake.reply_always(big);
  auto budget = std::make_shared<ResponseBudget>(4000);
  auto config = member(fake.base_url(), "budgeted");
  auto url = parse_url(config.base_url);
  ASSERT_TRUE(url.ok());
  UpstreamClient c(config, url.value(), nullptr, "test-pool", budget);
  auto error = expect_error(run([&] { return complete(c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::overloaded) << error.message;
  EXPECT_NE(error.message.find("max_in_flight_response_bytes"), std::string::npos);
  EXPECT_EQ(error.to_api_error().status, 429);
  EXPECT_EQ(budget->in_use(), 0);

  // A stream needs its read buffer at least: under that, refused too, before any chunk.
  FakeReply streamed;
  streamed.stream = true;
  streamed.events = {content_chunk("a")};
  fake.reply_always(streamed);
  std::vector<std::string> chunks;
  auto refused = expect_error(run([&] { return stream(c, stream_request(false), chunks); }));
  EXPECT_EQ(refused.kind, UpstreamErrorKind::overloaded) << refused.message;
  EXPECT_TRUE(chunks.empty());
  EXPECT_EQ(budget->in_use(), 0);
}

TEST_F(UpstreamClientTest, CallsWithinTheBudgetSucceedAndReturnTheirBytes) {
  FakeUpstream fake;
  auto budget = std::make_shared<ResponseBudget>(1 << 20);
  auto config = member(fake.base_url(), "within-budget");
  auto url = parse_url(config.base_url);
  ASSERT_TRUE(url.ok());
  UpstreamClient c(config, url.value(), nullptr, "test-pool", budget);
  ASSERT_TRUE(run([&] { return complete(c); }).ok());
  FakeReply streamed;
  streamed.stream = true;
  streamed.events = {content_chunk("a"), content_chunk("b")};
  fake.reply_always(streamed);
  std::vector<std::string> chunks;
  auto summary = run([&] { return stream(c, stream_request(false), chunks); });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(chunks.size(), 2u);
  EXPECT_EQ(budget->in_use(), 0);
}

// --- HTTPS ---------------------------------------------------------------------------------

class UpstreamTlsTest : public UpstreamClientTest {
 protected:
  testing::TestCertificate certificate_ = testing::make_self_signed("IP:127.0.0.1,DNS:localhost");
  testing::TempPemFile ca_file_{certificate_.cert_pem};
};

TEST_F(UpstreamTlsTest, TrustedThroughCaFile) {
  FakeUpstream fake(FakeUpstream::Mode::https, testing::server_tls_context(certificate_));
  auto config = member(fake.base_url(), "tls-ca");
  config.ca_file = ca_file_.path();
  auto tls = make_member_tls_context(config, nullptr);
  ASSERT_TRUE(tls.ok()) << tls.error().message;
  auto c = client(config, tls.value());
  for (int i = 0; i < 2; ++i) {
    auto result = run([&] { return complete(*c); });
    ASSERT_TRUE(result.ok()) << result.error().message;
  }
  std::vector<std::string> chunks;
  FakeReply reply;
  reply.stream = true;
  reply.events = {content_chunk("secure")};
  fake.reply_always(reply);
  auto summary = run([&] { return stream(*c, stream_request(false), chunks); });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(chunks, std::vector<std::string>{content_chunk("secure")});
  EXPECT_EQ(fake.accepted(), 1);  // kept alive across TLS calls too
}

TEST_F(UpstreamTlsTest, UntrustedCertificateFailsToConnect) {
  FakeUpstream fake(FakeUpstream::Mode::https, testing::server_tls_context(certificate_));
  auto c = client(member(fake.base_url(), "tls-system"));  // system CAs only
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::connect_failed) << error.message;
  EXPECT_TRUE(fake.requests().empty());
}

TEST_F(UpstreamTlsTest, CertificateForAnotherHostFailsToConnect) {
  auto other = testing::make_self_signed("DNS:example.com");
  testing::TempPemFile other_ca(other.cert_pem);
  FakeUpstream fake(FakeUpstream::Mode::https, testing::server_tls_context(other));
  auto config = member(fake.base_url(), "tls-mismatch");
  config.ca_file = other_ca.path();
  auto tls = make_member_tls_context(config, nullptr);
  ASSERT_TRUE(tls.ok());
  auto c = client(config, tls.value());
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::connect_failed) << error.message;
}

TEST_F(UpstreamTlsTest, TlsVerifyFalseIsWarnedAboutAtStart) {
  PoolConfig config;
  config.name = "cloud-large";
  auto insecure = member("https://127.0.0.1:1/v1", "no-verify-member");
  insecure.tls_verify = false;
  config.members = {member("https://127.0.0.1:2/v1", "verified"), insecure};
  LogCapture log;
  ASSERT_TRUE(CloudPool::create(config, nullptr).ok());
  std::string logged = log.text();
  EXPECT_NE(logged.find("warning"), std::string::npos) << logged;
  EXPECT_NE(logged.find("cloud-large"), std::string::npos) << logged;
  EXPECT_NE(logged.find("no-verify-member"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("'verified'"), std::string::npos) << logged;
}

TEST_F(UpstreamTlsTest, VerificationCanBeTurnedOff) {
  FakeUpstream fake(FakeUpstream::Mode::https, testing::server_tls_context(certificate_));
  auto config = member(fake.base_url(), "tls-noverify");
  config.tls_verify = false;
  auto tls = make_member_tls_context(config, nullptr);
  ASSERT_TRUE(tls.ok());
  auto c = client(config, tls.value());
  auto result = run([&] { return complete(*c); });
  ASSERT_TRUE(result.ok()) << result.error().message;
}

TEST_F(UpstreamTlsTest, HandshakeThatNeverCompletesIsAConnectTimeout) {
  FakeUpstream fake(FakeUpstream::Mode::silent);
  auto config = member(fake.base_url(), "tls-silent");
  config.tls_verify = false;
  config.connect_timeout_ms = 150;
  auto tls = make_member_tls_context(config, nullptr);
  ASSERT_TRUE(tls.ok());
  auto c = client(config, tls.value());
  auto start = std::chrono::steady_clock::now();
  auto error = expect_error(run([&] { return complete(*c); }));
  EXPECT_EQ(error.kind, UpstreamErrorKind::connect_timeout) << error.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(error.to_api_error().code, "upstream_connect_timeout");
}

}  // namespace
}  // namespace hengshi::cloud
