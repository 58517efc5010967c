// The degradation chain against real hengshi-sim upstreams (chaos, on loopback, each bounded in
// time): an upstream down, a TTFT past the level's budget, a 429 storm with Retry-After, 5xx
// bursts, a stream breaking before and after its commit point, offline mode and its recovery.
// Each test checks what the client sees (status, text, metadata level/attempts/offline), that no
// request outlives its deadline, and from the sims' own counters that no retry storm happened.
#include <chrono>
#include <string>

#include "integration/gateway_fixture.h"
#include "support/wait_until.h"

namespace hengshi::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class GatewayChainTest : public GatewayFixture {
 protected:
  void set_profile(ChildProcess& sim, const json& profile) {
    auto result = http_call(sim.host(), sim.port(), {"POST", "/admin/profile", profile.dump(), "application/json", {}});
    ASSERT_EQ(result.status, 200) << result.body;
  }
  HttpResult timed_chat(const std::string& body, int deadline_ms, milliseconds* elapsed) {
    const auto started = steady_clock::now();
    auto result = chat(body, {{"X-Hengshi-Deadline-Ms", std::to_string(deadline_ms)}});
    *elapsed = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
    return result;
  }
  static std::string content_of(const HttpResult& result) {
    return result.json()["choices"][0]["message"]["content"].get<std::string>();
  }
};

TEST_F(GatewayChainTest, AnUpstreamThatIsDownFallsThroughToTheNextPool) {
  GatewayOptions options;
  options.small_url_override = "http://127.0.0.1:1/v1";  // nothing listens there
  options.extra_yaml = "chain:\n  offline: {enabled: false}\n";
  start(options);
  milliseconds elapsed{};
  auto reply = timed_chat(user_message("auto", "hello"), 5000, &elapsed);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  EXPECT_EQ(meta["route"], "cloud-small");
  EXPECT_EQ(meta["level"], 3) << meta.dump();
  EXPECT_EQ(meta["answered_by"], "cloud-large");
  EXPECT_EQ(meta["hops"][0]["outcome"], "connect_failed");
  // Connect failures are retried with backoff on the same level, at most the schedule's length.
  EXPECT_GE(meta["hops"][0]["attempts"].size(), 2u);
  EXPECT_LE(meta["hops"][0]["attempts"].size(), 4u);
  EXPECT_EQ(meta["attempts"].get<int>(), static_cast<int>(meta["hops"][0]["attempts"].size()) + 1);
  EXPECT_LT(elapsed, milliseconds(5000));
  EXPECT_EQ(sim_requests(*large_), 1);
}

TEST_F(GatewayChainTest, ASlowFirstTokenPastTheLevelsShareMovesOnWithinTheDeadline) {
  GatewayOptions options;
  options.small_ttft_timeout_ms = 10'000;  // only the chain's level budget cuts it
  options.small_total_timeout_ms = 20'000;
  start(options);
  set_profile(*small_, {{"ttft_ms", {{"p50", 5000}}}, {"latency_ms", {{"p50", 5000}}}});
  milliseconds elapsed{};
  // 2,000 ms budget: cloud-small gets half of it, cloud-large what is left.
  auto reply = timed_chat(user_message("auto", "hello"), 2000, &elapsed);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  EXPECT_EQ(meta["level"], 3) << meta.dump();
  EXPECT_EQ(meta["hops"][0]["outcome"], "total_timeout");
  EXPECT_NEAR(meta["hops"][0]["ms"].get<double>(), 1000.0, 250.0) << "the level's 50% share";
  EXPECT_LT(elapsed, milliseconds(2000 + 200));
  // The same for a stream: the attempt with no first piece by the level's deadline is abandoned.
  auto stream = timed_chat(user_message("auto", "hello", true), 2000, &elapsed);
  ASSERT_EQ(stream.status, 200) << stream.body;
  auto events = stream.sse_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["hengshi"]["level"], 3) << stream.body;
  EXPECT_EQ(events.back()["hengshi"]["hops"][0]["outcome"], "ttft_timeout");
  EXPECT_LT(elapsed, milliseconds(2000 + 200));
}

TEST_F(GatewayChainTest, A429StormIsRetriedWithinTheBudgetAndTheFinal429CarriesRetryAfter) {
  start();
  set_profile(*small_, {{"rate_limit_rate", 1.0}, {"retry_after_s", 1}});
  milliseconds elapsed{};
  // Pinned to cloud-small: no other pool stands in, so the client gets the upstream's 429.
  auto reply = timed_chat(user_message("cloud-small", "hello"), 2500, &elapsed);
  ASSERT_EQ(reply.status, 429) << reply.body;
  EXPECT_EQ(reply.header("retry-after"), "1");
  const json meta = reply.json()["hengshi"];
  const int attempts = meta["attempts"].get<int>();
  // Retry-After (1 s) is a floor on each wait, so a 2.5 s budget holds at most 3 attempts.
  EXPECT_GE(attempts, 2) << meta.dump();
  EXPECT_LE(attempts, 3) << meta.dump();
  EXPECT_EQ(sim_requests(*small_), attempts) << "every attempt is one upstream call: no hidden retries";
  EXPECT_LT(elapsed, milliseconds(2500 + 200));
}

TEST_F(GatewayChainTest, FiveHundredBurstsAreAbsorbedWithoutARetryStorm) {
  start();
  set_profile(*small_, {{"error_rate", 0.5}});
  int model_answers = 0;
  int attempts = 0;
  for (int i = 0; i < 20; ++i) {
    auto reply = chat(user_message("auto", "question " + std::to_string(i)), {{"X-Hengshi-Deadline-Ms", "5000"}});
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json meta = reply.json()["hengshi"];
    model_answers += meta["answer_kind"] == "model" ? 1 : 0;
    attempts += meta["attempts"].get<int>();
  }
  // Half of cloud-small's calls fail: retries and cloud-large absorb it, every answer a model's.
  EXPECT_EQ(model_answers, 20);
  const int upstream_calls = sim_requests(*small_) + sim_requests(*large_);
  EXPECT_EQ(upstream_calls, attempts) << "the gateway's loop is the only retry loop";
  // With half the calls failing, about two calls per request; a storm would be many more.
  EXPECT_LE(upstream_calls, 20 * 3);
}

// A pool failing 30% of its calls, one member per pool (the README's defaults otherwise): the
// retries absorb it and the breakers stay out of the way, so nearly every answer is a model's,
// never the canned "busy" reply that a breaker opening at the first bad streak would give.
TEST_F(GatewayChainTest, ThirtyPercentErrorsOnEveryPoolStillGiveModelAnswers) {
  start();
  set_profile(*small_, {{"error_rate", 0.3}});
  set_profile(*large_, {{"error_rate", 0.3}});
  constexpr int kRequests = 100;
  int model_answers = 0;
  int canned = 0;
  int attempts = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto reply = chat(user_message("auto", "what is the capital of country number " + std::to_string(i)),
                      {{"X-Hengshi-Deadline-Ms", "5000"}});
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json meta = reply.json()["hengshi"];
    if (meta["answer_kind"] == "model") ++model_answers;
    if (meta["answer_kind"] == "canned") {
      ++canned;
      EXPECT_EQ(reply.header("x-hengshi-degraded"), "last_resort");
      EXPECT_EQ(meta["level"], 4);
    } else {
      EXPECT_EQ(reply.header("x-hengshi-degraded"), "");
    }
    attempts += meta["attempts"].get<int>();
  }
  // Three tries per pool at 30% errors fail 2.7% of the time; both pools together far less.
  EXPECT_GE(model_answers, 97) << canned << " canned replies";
  EXPECT_LE(static_cast<double>(attempts) / kRequests, 1.6);
  // The metric splits answers the same way as the metadata.
  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("hengshi_chain_answers_total{level=\"L2\",kind=\"model\"}"), std::string::npos)
      << metrics.substr(0, 2000);
}

TEST_F(GatewayChainTest, AStreamBrokenBeforeItsCommitPointIsReplacedInvisibly) {
  start();
  set_profile(*small_, {{"disconnect_rate", 1.0}, {"disconnect_after_chunks", 2}});
  auto stream = chat(user_message("auto", "tell me something", true), {{"X-Hengshi-Deadline-Ms", "5000"}});
  ASSERT_EQ(stream.status, 200) << stream.body;
  auto events = stream.sse_events();
  ASSERT_FALSE(events.empty());
  for (const auto& event : events) {
    EXPECT_FALSE(event.contains("error")) << stream.body;
    if (event.contains("model")) {
      EXPECT_EQ(event["model"], "sim-large") << "nothing of the broken stream";
    }
  }
  EXPECT_EQ(events.back()["hengshi"]["level"], 3);
  EXPECT_EQ(events.back()["hengshi"]["hops"][0]["outcome"], "closed_early");
  EXPECT_GT(events.back()["hengshi"]["committed_after_pieces"].get<int>(), 0) << "held, so it could be replaced";
}

// A healthy member's stream goes out as it comes (the first one from a member is held: nothing
// is known of it yet); a request may still ask for the hold.
TEST_F(GatewayChainTest, AHealthyMembersStreamIsNotHeldUnlessTheRequestAsks) {
  start();
  auto first = chat(user_message("cloud-small", "tell me something", true));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_GT(first.sse_events().back()["hengshi"]["committed_after_pieces"].get<int>(), 0);
  auto second = chat(user_message("cloud-small", "tell me something else", true));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.sse_events().back()["hengshi"]["committed_after_pieces"], 0) << second.body;
  nlohmann::json always = nlohmann::json::parse(user_message("cloud-small", "and once more", true));
  always["hengshi"] = {{"commit", "always"}};
  auto held = chat(always.dump());
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_GT(held.sse_events().back()["hengshi"]["committed_after_pieces"].get<int>(), 0) << held.body;
  nlohmann::json bad = always;
  bad["hengshi"] = {{"commit", "sometimes"}};
  auto refused = chat(bad.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.json()["error"]["param"], "hengshi.commit");
}

TEST_F(GatewayChainTest, AStreamBrokenAfterItsCommitPointEndsWithAnErrorNeverASplice) {
  GatewayOptions options;
  options.extra_yaml = "chain:\n  commit: {tokens: 1, first_sentence: false}\n";
  start(options);
  set_profile(*small_, {{"disconnect_rate", 1.0}, {"disconnect_after_chunks", 4}});
  auto stream = chat(user_message("auto", "tell me something", true), {{"X-Hengshi-Deadline-Ms", "5000"}});
  ASSERT_EQ(stream.status, 200) << stream.body;
  auto events = stream.sse_events();
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().contains("error")) << stream.body;
  EXPECT_TRUE(events.back()["hengshi"]["hops"][0]["attempts"].size() == 1u) << "no retry after the commit point";
  EXPECT_EQ(sim_requests(*large_), 0) << "never continued by another model";
  expect_gateway_alive();
}

TEST_F(GatewayChainTest, OfflineModeAnswersFromTheLastResortAndRecoversWhenTheCloudIsBack) {
  GatewayOptions options;
  options.small_url_override = "http://127.0.0.1:1/v1";
  options.extra_yaml =
      "chain:\n  offline: {probe_interval_ms: 100, notice: \" [offline]\"}\n  retry: {enabled: false}\n";
  start(options);
  // cloud-large answers while cloud-small is down, but every request's first call fails to
  // connect: three in a row switch the gateway offline.
  const int large_port = large_->port();
  large_.reset();
  for (int i = 0; i < 3; ++i) {
    auto reply = chat(user_message("auto", "hello"), {{"X-Hengshi-Deadline-Ms", "3000"}});
    ASSERT_EQ(reply.status, 200) << reply.body;
  }
  auto ready = get("/readyz").json();
  EXPECT_EQ(ready["chain"]["offline"], true) << ready.dump();
  auto offline = chat(user_message("auto", "hello"), {{"X-Hengshi-Deadline-Ms", "3000"}});
  ASSERT_EQ(offline.status, 200) << offline.body;
  const json meta = offline.json()["hengshi"];
  EXPECT_EQ(meta["offline"], true) << meta.dump();
  EXPECT_EQ(meta["reason"], "offline");
  EXPECT_EQ(meta["level"], 4);
  EXPECT_EQ(meta["attempts"], 1) << "no cloud call while offline";
  EXPECT_NE(content_of(offline).find("[offline]"), std::string::npos) << "the notice is in the text";
  EXPECT_EQ(offline.header("x-hengshi-offline"), "true");

  // The cloud comes back on the same port: the background probe switches the gateway online.
  large_ = std::make_unique<ChildProcess>(ChildProcess::start({binary_path("tools/sim/hengshi-sim"), "--listen",
                                                                "127.0.0.1:" + std::to_string(large_port), "--name",
                                                                "large-sim", "--seed", "2"}));
  EXPECT_TRUE(wait_until([&] { return get("/readyz").json()["chain"]["offline"] == false; }, std::chrono::seconds(10)));
  auto online = chat(user_message("auto", "hello"), {{"X-Hengshi-Deadline-Ms", "3000"}});
  ASSERT_EQ(online.status, 200) << online.body;
  EXPECT_EQ(online.json()["hengshi"]["offline"], false);
  EXPECT_EQ(online.json()["hengshi"]["answered_by"], "cloud-large");
  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("hengshi_offline_transitions_total{to=\"offline\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("hengshi_offline_transitions_total{to=\"online\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::testing
