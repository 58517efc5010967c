// Round trips through a real gateway to real simulated upstreams: JSON and SSE, routing by
// model, metadata, keep-alive, metrics and the request log.
#include <fstream>
#include <sstream>

#include "integration/gateway_fixture.h"

namespace hengshi::testing {
namespace {

class GatewayRoundTripTest : public GatewayFixture {
 protected:
  void SetUp() override { start(); }
};

TEST_F(GatewayRoundTripTest, NonStreamingGoesToThePoolNamedByModel) {
  auto small = chat(user_message("cloud-small", "where is my order"));
  ASSERT_EQ(small.status, 200) << small.body;
  auto body = small.json();
  EXPECT_EQ(body["sim"]["name"], "small-sim");
  EXPECT_EQ(body["sim"]["model"], "sim-small");  // the member's model was sent upstream
  EXPECT_FALSE(body["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_EQ(body["hengshi"]["route"], "cloud-small");
  EXPECT_EQ(body["hengshi"]["reason"], "model_pinned");
  EXPECT_EQ(body["hengshi"]["upstream"], "small-1");
  EXPECT_EQ(body["hengshi"]["cache"], "off") << "the fixture turns the cache off";
  EXPECT_EQ(body["hengshi"]["attempts"], 1);
  EXPECT_GE(body["hengshi"]["overhead_us"].get<long>(), 0);
  EXPECT_GT(body["hengshi"]["cost"].get<double>(), 0.0);
  EXPECT_EQ(small.header("x-hengshi-route"), "cloud-small");
  EXPECT_EQ(small.header("x-hengshi-reason"), "model_pinned");
  EXPECT_EQ(small.header("x-hengshi-cache"), "off");
  EXPECT_FALSE(small.header("x-hengshi-request-id").empty());

  auto large = chat(user_message("cloud-large", "explain the refund policy"));
  ASSERT_EQ(large.status, 200) << large.body;
  EXPECT_EQ(large.json()["sim"]["name"], "large-sim");
  EXPECT_EQ(large.json()["hengshi"]["route"], "cloud-large");

  auto other = chat(user_message("gpt-4o-mini", "hello"));
  ASSERT_EQ(other.status, 200) << other.body;
  EXPECT_EQ(other.json()["hengshi"]["route"], "cloud-small");
  EXPECT_EQ(other.json()["hengshi"]["reason"], "default_pool");
}

TEST_F(GatewayRoundTripTest, StreamingPassesChunksAndEndsWithMetadataAndDone) {
  auto result = chat(user_message("cloud-large", "stream me an answer", /*stream=*/true));
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_NE(result.header("content-type").find("text/event-stream"), std::string::npos);
  EXPECT_EQ(result.header("x-hengshi-route"), "cloud-large");
  auto events = result.sse_data();
  ASSERT_GE(events.size(), 4u) << result.body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  nlohmann::json meta;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    auto chunk = nlohmann::json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    if (chunk.contains("hengshi")) {
      meta = chunk["hengshi"];
      EXPECT_EQ(i, events.size() - 2) << "metadata must be the last chunk before [DONE]";
      EXPECT_TRUE(chunk["choices"].empty());
      continue;
    }
    EXPECT_FALSE(chunk.contains("usage") && chunk["choices"].empty())
        << "the caller did not ask for usage, so no usage-only chunk is passed";
    for (const auto& choice : chunk["choices"]) {
      if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_NE(text.find("[large-sim/sim-large]"), std::string::npos) << text;
  ASSERT_TRUE(meta.is_object());
  EXPECT_EQ(meta["route"], "cloud-large");
  EXPECT_EQ(meta["upstream"], "large-1");
  EXPECT_EQ(meta["model"], "sim-large");
}

TEST_F(GatewayRoundTripTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  HttpConnection connection(gateway_->host(), gateway_->port());
  for (int i = 0; i < 5; ++i) {
    auto result = connection.send({"POST", "/v1/chat/completions",
                                   user_message("cloud-small", "again " + std::to_string(i)),
                                   "application/json", {}});
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_TRUE(result.keep_alive);
  }
  EXPECT_EQ(sim_stats(*small_)["requests_total"], 5);
}

TEST_F(GatewayRoundTripTest, DeadlineHeaderBoundsTheWait) {
  auto result = chat(user_message("cloud-small", "slow please [[sim:slow=5000]]"),
                     {{"X-Hengshi-Deadline-Ms", "300"}});
  EXPECT_EQ(result.status, 504) << result.body;
  EXPECT_EQ(result.json()["error"]["type"], "timeout_error");
  auto bad = chat(user_message("cloud-small", "x"), {{"X-Hengshi-Deadline-Ms", "soon"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["param"], "X-Hengshi-Deadline-Ms");
}

TEST_F(GatewayRoundTripTest, ServiceEndpoints) {
  EXPECT_EQ(get("/healthz").status, 200);
  EXPECT_EQ(get("/readyz").status, 200);
  auto models = get("/v1/models");
  ASSERT_EQ(models.status, 200);
  std::string ids;
  const auto listed = models.json();
  for (const auto& m : listed["data"]) ids += m["id"].get<std::string>() + ",";
  EXPECT_NE(ids.find("cloud-small"), std::string::npos);
  EXPECT_NE(ids.find("cloud-large"), std::string::npos);

  ASSERT_EQ(chat(user_message("cloud-small", "count me")).status, 200);
  // The request is counted just after its response is written: wait for the count, not a sleep.
  const std::string counted =
      "hengshi_http_requests_total{route=\"/v1/chat/completions\",method=\"POST\",status=\"200\"} 1";
  EXPECT_TRUE(wait_until([&] { return admin_get("/metrics").body.find(counted) != std::string::npos; }));
  auto metrics = admin_get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.header("content-type").find("text/plain"), std::string::npos);
  EXPECT_NE(metrics.body.find("hengshi_http_requests_total{route=\"/v1/chat/completions\",method=\"POST\",status=\"200\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("hengshi_http_request_duration_seconds_bucket{route=\"/v1/chat/completions\""),
            std::string::npos);
  EXPECT_NE(metrics.body.find("hengshi_routed_requests_total{route=\"cloud-small\",reason=\"model_pinned\"} 1"),
            std::string::npos);
}

TEST_F(GatewayRoundTripTest, RequestLogRecordsEveryDecisionWithoutMessageText) {
  ASSERT_EQ(chat(user_message("cloud-large", "my secret question")).status, 200);
  std::string line;
  ASSERT_TRUE(wait_until([&] {
    std::ifstream in(log_path_);
    return static_cast<bool>(std::getline(in, line));
  }));
  auto record = nlohmann::json::parse(line);
  EXPECT_EQ(record["route"], "cloud-large");
  EXPECT_EQ(record["reason"], "model_pinned");
  EXPECT_EQ(record["outcome"], "ok");
  EXPECT_EQ(record["status"], 200);
  EXPECT_GT(record["tokens"]["completion"].get<long>(), 0);
  EXPECT_EQ(line.find("my secret question"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::testing
