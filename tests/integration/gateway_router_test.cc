// The router over HTTP: the real gateway with hengshi-sim playing both pools; each response's
// metadata must show the route and reason decide() gave, and the sims must see only the
// requests the router sent them (PII never reaches a cloud upstream).
#include <csignal>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "integration/gateway_fixture.h"

namespace hengshi::testing {
namespace {

using nlohmann::json;

class GatewayRouterTest : public GatewayFixture {
 protected:
  void SetUp() override {
    policy_path_ = temp_path("router-policy.yaml");
    write_policy("human_message: \"HUMAN-HANDOFF\"\npii:\n  safe_message: \"SAFE-REPLY\"\n");
    GatewayOptions options;
    // No L4 canned reply: what these tests check is the router's decision and the error the
    // client gets when no level can answer (a canned reply would turn a spent budget into a 200).
    options.extra_yaml = "routing:\n  policy_file: " + policy_path_ +
                         "\n  watch_interval_ms: 0\nchain:\n  last_resort:\n    kind: error\n";
    start(options);
  }
  void TearDown() override {
    GatewayFixture::TearDown();
    std::remove(policy_path_.c_str());
  }
  void write_policy(const std::string& yaml) { std::ofstream(policy_path_, std::ios::trunc) << yaml; }
  json meta_of(const HttpResult& reply) { return reply.json()["hengshi"]; }
  std::string content_of(const HttpResult& reply) {
    return reply.json()["choices"][0]["message"]["content"].get<std::string>();
  }
  HttpResult post(const std::string& target) {
    return http_call(gateway_->host(), gateway_->port(), {"POST", target, "", "", {}});
  }

  std::string policy_path_;
};

TEST_F(GatewayRouterTest, PiiNeverReachesACloudUpstreamEvenWhenPinned) {
  for (const std::string model : {"cloud-large", "cloud-small", "auto"}) {
    auto reply = chat(user_message(model, "我的手机是13812345678，帮我查一下订单"));
    ASSERT_EQ(reply.status, 200) << reply.body;
    json meta = meta_of(reply);
    EXPECT_EQ(meta["route"], "refuse") << model;  // no edge engine configured: fail closed
    EXPECT_EQ(meta["reason"], "pii_pin");
    EXPECT_EQ(meta["figures"]["pii"][0], "mobile_cn");
    EXPECT_EQ(content_of(reply), "SAFE-REPLY");
  }
  // PII in an earlier turn counts too: the history would go upstream.
  json body = {{"model", "cloud-large"},
               {"messages", {{{"role", "user"}, {"content", "my email is alice@example.com"}},
                             {{"role", "assistant"}, {"content", "ok"}},
                             {{"role", "user"}, {"content", "what's next?"}}}}};
  auto reply = chat(body.dump());
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(meta_of(reply)["reason"], "pii_pin");
  EXPECT_EQ(sim_requests(*small_), 0);
  EXPECT_EQ(sim_requests(*large_), 0);
}

TEST_F(GatewayRouterTest, SensitiveSignalsGoToTheirTargets) {
  auto human = chat(user_message("cloud-small", "我要投诉你们的服务"));
  ASSERT_EQ(human.status, 200) << human.body;
  EXPECT_EQ(meta_of(human)["route"], "human");
  EXPECT_EQ(meta_of(human)["reason"], "sensitive_signal");
  EXPECT_EQ(meta_of(human)["figures"]["signal"], "complaint");
  EXPECT_EQ(content_of(human), "HUMAN-HANDOFF");
  EXPECT_EQ(human.header("x-hengshi-route"), "human");

  auto fraud = chat(user_message("cloud-small", "I think my card was stolen"));
  ASSERT_EQ(fraud.status, 200) << fraud.body;
  EXPECT_EQ(meta_of(fraud)["route"], "cloud-large");
  EXPECT_EQ(meta_of(fraud)["reason"], "sensitive_signal");
  EXPECT_EQ(sim_requests(*large_), 1);
  EXPECT_EQ(sim_requests(*small_), 0);
}

TEST_F(GatewayRouterTest, CapabilityMissIsAnAdmissionNotAFallback) {
  auto reply = chat(user_message("auto", "write a function that adds two numbers"),
                    {{"X-Hengshi-Task-Type", "code"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  json meta = meta_of(reply);
  EXPECT_EQ(meta["reason"], "capability_miss");
  EXPECT_EQ(meta["figures"]["capability"], "edge_not_allowed");
  EXPECT_TRUE(meta["fallback_type"].is_null());
  EXPECT_TRUE(meta["route"] == "cloud-small" || meta["route"] == "cloud-large");
}

TEST_F(GatewayRouterTest, ComplexRequestsGoToCloudLargeAndSimpleOnesToTheDefaultPool) {
  auto simple = chat(user_message("auto", "hi"));
  ASSERT_EQ(simple.status, 200);
  EXPECT_EQ(meta_of(simple)["route"], "cloud-small");
  EXPECT_EQ(meta_of(simple)["reason"], "default_pool");

  auto complex = chat(user_message(
      "auto",
      "Compare PostgreSQL and MySQL for an analytics workload. Explain the trade-offs step by step, "
      "analyze why each choice matters, what the pros and cons are, and give the answer as a table "
      "in JSON format with at most 10 rows. Why would one be faster? How do indexes differ?"));
  ASSERT_EQ(complex.status, 200) << complex.body;
  EXPECT_EQ(meta_of(complex)["route"], "cloud-large");
  EXPECT_EQ(meta_of(complex)["reason"], "complexity_high");
  EXPECT_GE(meta_of(complex)["figures"]["complexity"].get<int>(), 4);
}

TEST_F(GatewayRouterTest, ASpentBudgetNeverHangs) {
  // The upstream takes 200 ms, so a 1 ms budget cannot be met (a loopback sim answering at once
  // could otherwise beat it, and the test would depend on the machine's speed).
  json body = json::parse(user_message("auto", "hello [[sim:slow=200]]"));
  body["hengshi"] = {{"deadline_ms", 1}};
  auto reply = chat(body.dump());
  // Either the router sees the budget gone (refuse) or no pool fits and the call times out.
  EXPECT_EQ(reply.status, 504) << reply.body;
  std::string reason = meta_of(reply)["reason"];
  EXPECT_TRUE(reason == "deadline_exceeded" || reason == "latency_pressure") << reason;
  expect_gateway_alive();
}

TEST_F(GatewayRouterTest, ReloadSwapsThePolicyAndABadFileKeepsTheOldOne) {
  const std::string before = meta_of(chat(user_message("auto", "zebra crossing")))["figures"]["policy"];
  EXPECT_EQ(meta_of(chat(user_message("auto", "zebra crossing")))["route"], "cloud-small");

  write_policy("sensitive:\n  - {name: zebra, keywords: [zebra], target: human}\n");
  auto reloaded = admin_post("/admin/reload");
  ASSERT_EQ(reloaded.status, 200) << reloaded.body;
  const std::string after = reloaded.json()["version"];
  EXPECT_NE(after, before);
  json meta = meta_of(chat(user_message("auto", "zebra crossing")));
  EXPECT_EQ(meta["route"], "human");
  EXPECT_EQ(meta["figures"]["policy"], after);

  write_policy("sensitive:\n  - {name: zebra, keywords: [zebra], target: moon}\n");
  auto rejected = admin_post("/admin/reload");
  EXPECT_EQ(rejected.status, 422) << rejected.body;
  EXPECT_EQ(rejected.json()["error"]["code"], "policy_rejected");
  EXPECT_NE(rejected.json()["error"]["message"].get<std::string>().find("sensitive[0]"), std::string::npos);
  EXPECT_EQ(meta_of(chat(user_message("auto", "zebra crossing")))["figures"]["policy"], after);

  // SIGHUP reloads too: back to a policy without the zebra rule.
  write_policy("human_message: \"HUMAN-HANDOFF\"\n");
  gateway_->signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] {
    return meta_of(chat(user_message("auto", "zebra crossing")))["route"] == "cloud-small";
  }));
  auto metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("hengshi_router_policy_reloads_total{outcome=\"rejected\"} 1"), std::string::npos);
  expect_gateway_alive();
}

}  // namespace
}  // namespace hengshi::testing
