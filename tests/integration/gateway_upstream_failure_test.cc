// An upstream that fails, returns garbage, closes early or never answers gives the client a
// 502/504 OpenAI-style error within the configured timeout — never a hang.
#include "integration/gateway_fixture.h"

namespace hengshi::testing {
namespace {

using std::chrono::steady_clock;

class GatewayUpstreamFailureTest : public GatewayFixture {
 protected:
  void SetUp() override { start(options()); }
  static GatewayOptions options() {
    GatewayOptions options;
    options.small_ttft_timeout_ms = 500;
    options.small_total_timeout_ms = 1500;
    // These tests show what one kind of failure looks like to the client. Offline mode (3 timeouts
    // in a row → answers from the edge or L4) has tests of its own; left on, whether a test's
    // retries reach the third timeout would decide between a 504 and an offline 200.
    options.extra_yaml = "chain:\n  offline:\n    enabled: false\n";
    return options;
  }
  void expect_error(const HttpResult& result, int status, const std::string& code) {
    EXPECT_EQ(result.status, status) << result.body;
    auto body = nlohmann::json::parse(result.body, nullptr, false);
    ASSERT_TRUE(body.contains("error")) << result.body;
    EXPECT_EQ(body["error"]["code"], code) << result.body;
    EXPECT_EQ(body["hengshi"]["route"], "cloud-small") << "errors carry the routing metadata too";
    EXPECT_EQ(result.header("x-hengshi-route"), "cloud-small");
  }
};

TEST_F(GatewayUpstreamFailureTest, HangingUpstreamTimesOutWith504WithinTheDeadlineAfterRetries) {
  // Each attempt is cut at the member's 500 ms TTFT limit; the chain retries within the budget
  // (1,200 ms, less the last resort's reserve) and answers 504 before the deadline.
  const std::map<std::string, std::string> deadline = {{"X-Hengshi-Deadline-Ms", "1200"}};
  auto started = steady_clock::now();
  auto result = chat(user_message("cloud-small", "[[sim:hang]]"), deadline);
  auto elapsed = steady_clock::now() - started;
  // The last attempt ends at the member's TTFT limit or, when less than that was left, at the
  // level's deadline: a 504 either way.
  EXPECT_EQ(result.status, 504) << result.body;
  const std::string code = result.json()["error"]["code"];
  EXPECT_TRUE(code == "upstream_ttft_timeout" || code == "upstream_timeout") << result.body;
  EXPECT_LT(elapsed, std::chrono::milliseconds(1200 + 300)) << "the deadline bounds every retry";
  const auto meta = result.json()["hengshi"];
  EXPECT_GE(meta["attempts"].get<int>(), 2) << meta.dump();
  for (const auto& attempt : meta["hops"][0]["attempts"]) {
    EXPECT_TRUE(attempt["outcome"] == "ttft_timeout" || attempt["outcome"] == "total_timeout") << meta.dump();
  }
  // The streaming path has the same bound.
  started = steady_clock::now();
  auto stream = chat(user_message("cloud-small", "[[sim:hang]]", true), deadline);
  EXPECT_EQ(stream.status, 504) << stream.body;
  EXPECT_LT(steady_clock::now() - started, std::chrono::milliseconds(1200 + 300));
  expect_gateway_alive();
}

// With one I/O thread a call's time limit lives on its pooled connection
// (UpstreamClient::reuse_call_timers): a hang between answers on that connection is still cut at
// its limit, and the next question is answered.
class GatewayUpstreamFailureOneThreadTest : public GatewayUpstreamFailureTest {
 protected:
  void SetUp() override {
    GatewayOptions one_thread = options();
    one_thread.threads = 1;
    start(one_thread);
  }
};

TEST_F(GatewayUpstreamFailureOneThreadTest, AHangBetweenAnswersIsCutAtItsLimit) {
  EXPECT_EQ(chat(user_message("cloud-small", "where is my parcel?")).status, 200);
  const std::map<std::string, std::string> deadline = {{"X-Hengshi-Deadline-Ms", "1200"}};
  const auto started = steady_clock::now();
  auto result = chat(user_message("cloud-small", "[[sim:hang]]"), deadline);
  EXPECT_EQ(result.status, 504) << result.body;
  EXPECT_LT(steady_clock::now() - started, std::chrono::milliseconds(1200 + 300));
  auto stream = chat(user_message("cloud-small", "[[sim:hang]]", true), deadline);
  EXPECT_EQ(stream.status, 504) << stream.body;
  auto after = chat(user_message("cloud-small", "and my refund?"));
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.json()["hengshi"]["answer_kind"], "model") << after.body;
  expect_gateway_alive();
}

TEST_F(GatewayUpstreamFailureTest, GarbageIs502) {
  expect_error(chat(user_message("cloud-small", "[[sim:garbage]]")), 502, "upstream_bad_response");
  expect_gateway_alive();
}

TEST_F(GatewayUpstreamFailureTest, ServerErrorIs502AndRateLimitIs429) {
  expect_error(chat(user_message("cloud-small", "[[sim:error]]")), 502, "upstream_server_error");
  auto limited = chat(user_message("cloud-small", "[[sim:429]]"));
  expect_error(limited, 429, "upstream_rate_limited");
}

TEST_F(GatewayUpstreamFailureTest, EarlyCloseIs502AndMidStreamCloseEndsTheStreamWithAnError) {
  expect_error(chat(user_message("cloud-small", "[[sim:disconnect]]")), 502, "upstream_closed_early");
  auto stream = chat(user_message("cloud-small", "[[sim:disconnect]]", true));
  if (stream.status == 200) {
    // Headers were already sent: the failure arrives in-band as an error event.
    auto events = stream.sse_data();
    ASSERT_FALSE(events.empty());
    auto last = nlohmann::json::parse(events.back());
    EXPECT_EQ(last["error"]["code"], "upstream_closed_early") << stream.body;
  } else {
    EXPECT_EQ(stream.status, 502);
  }
  expect_gateway_alive();
}

class GatewayUnreachableUpstreamTest : public GatewayFixture {};

TEST_F(GatewayUnreachableUpstreamTest, ConnectFailureIs502) {
  GatewayOptions options;
  options.small_url_override = "http://127.0.0.1:9/v1";  // discard port: nothing listens
  start(options);
  auto result = chat(user_message("cloud-small", "anyone there?"));
  EXPECT_EQ(result.status, 502) << result.body;
  EXPECT_EQ(result.json()["error"]["code"], "upstream_connect_failed");
  EXPECT_EQ(get("/healthz").status, 200);
}

}  // namespace
}  // namespace hengshi::testing
