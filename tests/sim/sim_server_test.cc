#include "sim/sim_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/request_plan.h"
#include "sim_test_client.h"

namespace hengshi::sim {
namespace {

using nlohmann::json;
using simtest::Reply;
using simtest::sse_payloads;
using simtest::TestClient;

std::string chat_body(const std::string& model, const std::string& user_text, bool stream = false,
                      bool include_usage = false) {
  json body = {{"model", model}, {"messages", {{{"role", "user"}, {"content", user_text}}}}};
  if (stream) body["stream"] = true;
  if (include_usage) body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

class SimServerTest : public ::testing::Test {
 protected:
  void start(Profile profile = {}, SimOptions options = default_options()) {
    server_ = std::make_unique<SimServer>(io_, options, std::move(profile));
    auto bound = server_->listen(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    ASSERT_TRUE(bound.ok()) << bound.error().message;
    endpoint_ = *bound;
    ASSERT_NE(endpoint_.port(), 0);
    runner_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    io_.stop();
    if (runner_.joinable()) runner_.join();
  }

  static SimOptions default_options() {
    SimOptions options;
    options.name = "test-sim";
    options.seed = 11;
    return options;
  }

  Reply call(http::verb method, const std::string& target, const std::string& body = {}) {
    TestClient client(endpoint_);
    return client.call(method, target, body);
  }
  Reply chat(const std::string& body) {
    return call(http::verb::post, "/v1/chat/completions", body);
  }

  json stats() { return call(http::verb::get, "/admin/stats").json(); }

  // Polls /admin/stats until `predicate` holds; bounded by a 5 s deadline.
  template <typename Predicate>
  bool stats_reach(Predicate predicate) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      if (predicate(stats())) return true;
      std::this_thread::yield();
    }
    return false;
  }

  asio::io_context io_;
  std::unique_ptr<SimServer> server_;
  tcp::endpoint endpoint_;
  std::thread runner_;
};

TEST_F(SimServerTest, NonStreamAnswerHasOpenAiShape) {
  start();
  Reply reply = chat(chat_body("gpt-small", "what is two plus two"));
  ASSERT_FALSE(reply.error) << reply.error.message();
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.header("X-Sim-Name"), "test-sim");
  EXPECT_EQ(reply.header("Content-Type"), "application/json");
  json body = reply.json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-sim-", 0), 0u);
  EXPECT_EQ(body["model"], "gpt-small");
  EXPECT_EQ(body["sim"]["model"], "gpt-small");
  EXPECT_EQ(body["sim"]["name"], "test-sim");
  EXPECT_EQ(body["sim"]["request_index"], 0);
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["message"]["role"], "assistant");
  std::string content = choice["message"]["content"];
  EXPECT_EQ(content.rfind("[test-sim/gpt-small] what is two plus two", 0), 0u) << content;
  EXPECT_EQ(choice["finish_reason"], "stop");
  std::int64_t completion_tokens = body["usage"]["completion_tokens"];
  EXPECT_GE(completion_tokens, 8);
  EXPECT_LE(completion_tokens, 32);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], 5 + completion_tokens);
}

TEST_F(SimServerTest, StreamSendsRoleContentFinishUsageAndDone) {
  start();
  Reply reply = chat(chat_body("gpt-stream", "stream me", /*stream=*/true, /*include_usage=*/true));
  ASSERT_FALSE(reply.error) << reply.error.message();
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(reply.header("Content-Type"), "text/event-stream");
  auto payloads = sse_payloads(reply.body);
  ASSERT_GE(payloads.size(), 4u) << reply.body;
  EXPECT_EQ(payloads.back(), "[DONE]");

  json first = json::parse(payloads.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["sim"]["model"], "gpt-stream");
  json usage = json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  json finish = json::parse(payloads[payloads.size() - 3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");

  std::string content;
  for (std::size_t i = 1; i + 3 < payloads.size(); ++i) {
    content += json::parse(payloads[i])["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content.rfind("[test-sim/gpt-stream] stream me", 0), 0u) << content;
  EXPECT_EQ(usage["usage"]["completion_tokens"], static_cast<int>(payloads.size()) - 4);

  Reply plain = chat(chat_body("gpt-stream", "no usage", /*stream=*/true));
  auto plain_payloads = sse_payloads(plain.body);
  ASSERT_GE(plain_payloads.size(), 2u);
  EXPECT_EQ(json::parse(plain_payloads[plain_payloads.size() - 2])["choices"][0]["finish_reason"],
            "stop");
  EXPECT_EQ(stats()["streamed"], 2);
}

TEST_F(SimServerTest, RuntimeProfileSwitch) {
  start();
  EXPECT_EQ(chat(chat_body("m", "hi")).status, 200);

  Reply bad = call(http::verb::post, "/admin/profile", R"({"error_rate": 1.5})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["message"],
            "POST /admin/profile: error_rate: must be between 0 and 1 (got 1.5)");
  EXPECT_EQ(chat(chat_body("m", "hi")).status, 200);  // a bad profile never half-applies

  Reply switched = call(http::verb::post, "/admin/profile", R"({"error_rate": 1.0})");
  ASSERT_EQ(switched.status, 200) << switched.body;
  EXPECT_EQ(call(http::verb::get, "/admin/profile").json()["error_rate"], 1.0);
  Reply failed = chat(chat_body("m", "hi"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.json()["error"]["type"], "server_error");
  EXPECT_EQ(stats()["errors_injected"]["error"], 1);

  ASSERT_EQ(call(http::verb::post, "/admin/profile",
                 R"({"models": {"flaky": {"rate_limit_rate": 1.0, "retry_after_s": 5}}})")
                .status,
            200);
  EXPECT_EQ(chat(chat_body("m", "hi")).status, 200);
  Reply limited = chat(chat_body("flaky", "hi"));
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.header("Retry-After"), "5");
  json models = call(http::verb::get, "/v1/models").json();
  EXPECT_EQ(models["data"][0]["id"], "flaky");
}

TEST_F(SimServerTest, MarkersForceFaults) {
  start();
  Reply limited = chat(chat_body("m", "please [[sim:429]]"));
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.header("Retry-After"), "1");
  EXPECT_EQ(limited.json()["error"]["code"], "rate_limit_exceeded");

  Reply error = chat(chat_body("m", "[[sim:error]]"));
  EXPECT_EQ(error.status, 500);
  EXPECT_TRUE(error.json().contains("error"));

  Reply garbage = chat(chat_body("m", "[[sim:garbage]]"));
  EXPECT_EQ(garbage.status, 200);
  EXPECT_THROW((void)garbage.json(), json::parse_error);

  Reply garbage_stream = chat(chat_body("m", "[[sim:garbage]]", /*stream=*/true));
  auto payloads = sse_payloads(garbage_stream.body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_FALSE(json::accept(payloads[1]));

  json counts = stats()["errors_injected"];
  EXPECT_EQ(counts["rate_limit"], 1);
  EXPECT_EQ(counts["error"], 1);
  EXPECT_EQ(counts["garbage"], 2);
}

TEST_F(SimServerTest, StreamDisconnectStopsBeforeDone) {
  Profile profile;
  profile.defaults.disconnect_after_chunks = 3;
  start(profile);
  Reply reply = chat(chat_body("m", "[[sim:disconnect]]", /*stream=*/true));
  EXPECT_TRUE(reply.error);
  auto payloads = sse_payloads(reply.body);
  EXPECT_EQ(payloads.size(), 3u) << reply.body;
  for (const auto& payload : payloads) EXPECT_NE(payload, "[DONE]");
}

TEST_F(SimServerTest, NonStreamDisconnectSendsHalfTheBody) {
  start();
  Reply reply = chat(chat_body("m", "[[sim:disconnect]]"));
  EXPECT_EQ(reply.error, http::error::partial_message) << reply.error.message();
  EXPECT_EQ(stats()["errors_injected"]["disconnect"], 1);
}

TEST_F(SimServerTest, HangHoldsOnlyItsConnectionAndSeesTheClientLeave) {
  start();
  TestClient hanging(endpoint_);
  hanging.send_only(http::verb::post, "/v1/chat/completions", chat_body("m", "[[sim:hang]]"));
  ASSERT_TRUE(stats_reach([](const json& s) { return s["in_flight"] == 1; }));

  // Other connections are served while the hang is held.
  EXPECT_EQ(chat(chat_body("m", "still there?")).status, 200);
  EXPECT_EQ(stats()["errors_injected"]["hang"], 1);

  hanging.close();
  EXPECT_TRUE(stats_reach([](const json& s) {
    return s["client_disconnects"] == 1 && s["in_flight"] == 0;
  })) << stats().dump();
}

TEST_F(SimServerTest, SlowMarkerAndTtftDelayTheAnswer) {
  Profile profile;
  profile.defaults.ttft_ms = {120, 120};
  start(profile);
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(chat(chat_body("m", "[[sim:slow=150]]")).status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(150));

  started = std::chrono::steady_clock::now();
  Reply streamed = chat(chat_body("m", "ttft", /*stream=*/true));
  EXPECT_EQ(sse_payloads(streamed.body).back(), "[DONE]");
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(120));
}

TEST_F(SimServerTest, StreamIsPacedByTokensPerSecond) {
  Profile profile;
  profile.defaults.tokens_per_s = 200;  // 5 ms a token
  profile.defaults.output_tokens = {11, 11};
  start(profile);
  auto started = std::chrono::steady_clock::now();
  Reply streamed = chat(chat_body("m", "pace", /*stream=*/true));
  EXPECT_EQ(sse_payloads(streamed.body).size(), 1 + 11 + 1 + 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(50));
}

TEST_F(SimServerTest, BadInputGetsOpenAiErrors) {
  start();
  Reply not_json = chat("{nope");
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(not_json.json()["error"]["code"], "invalid_json");
  Reply no_model = chat(R"({"messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(no_model.status, 400);
  EXPECT_EQ(no_model.json()["error"]["param"], "model");
  Reply no_messages = chat(R"({"model":"m"})");
  EXPECT_EQ(no_messages.status, 400);
  EXPECT_EQ(call(http::verb::get, "/v1/nowhere").status, 404);
  EXPECT_EQ(call(http::verb::get, "/v1/chat/completions").status, 405);
  EXPECT_EQ(stats()["bad_requests"], 5);
  EXPECT_EQ(stats()["requests_total"], 0);
}

TEST_F(SimServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  start();
  TestClient client(endpoint_);
  for (int i = 0; i < 20; ++i) {
    Reply reply = client.call(http::verb::post, "/v1/chat/completions", chat_body("m", "again"));
    ASSERT_EQ(reply.status, 200);
    EXPECT_EQ(reply.json()["sim"]["request_index"], i);
  }
  EXPECT_EQ(client.call(http::verb::get, "/healthz").status, 200);
  json s = client.call(http::verb::get, "/admin/stats").json();
  EXPECT_EQ(s["connections_accepted"], 1);
  EXPECT_EQ(s["requests_by_model"]["m"], 20);
}

TEST_F(SimServerTest, SeededRunReplaysAfterResetAndMatchesThePlan) {
  Profile profile;
  profile.defaults.error_rate = 0.3;
  profile.defaults.rate_limit_rate = 0.2;
  profile.defaults.garbage_rate = 0.2;
  start(profile);
  auto run = [&] {
    std::string trace;
    TestClient client(endpoint_);
    for (int k = 0; k < 30; ++k) {
      Reply reply = client.call(http::verb::post, "/v1/chat/completions", chat_body("m", "seeded"));
      trace += std::to_string(reply.status) + ":" + std::to_string(reply.body.size()) + " ";
      RequestPlan plan =
          plan_request(profile.defaults, 11, static_cast<std::uint64_t>(k), false, {});
      int expected = plan.outcome == Outcome::kError       ? 500
                     : plan.outcome == Outcome::kRateLimit ? 429
                                                           : 200;
      EXPECT_EQ(reply.status, expected) << "request " << k;
    }
    return trace;
  };
  std::string first = run();
  ASSERT_EQ(call(http::verb::post, "/admin/reset").status, 200);
  EXPECT_EQ(stats()["requests_total"], 0);
  EXPECT_EQ(run(), first);
}

TEST_F(SimServerTest, IdleConnectionsAreClosed) {
  SimOptions options = default_options();
  options.idle_timeout = std::chrono::milliseconds(100);
  start({}, options);
  TestClient client(endpoint_);
  // A receive timeout bounds the test if the server never closes.
  timeval limit{5, 0};
  int fd = client.socket().native_handle();
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)), 0);
  char byte = 0;
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);  // orderly close by the server
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
}

}  // namespace
}  // namespace hengshi::sim
