// Shadow inference through the real gateway (issue 9 §7): the demo intent model answers the
// middle band (checked by cloud-small, played by the sim), and with chain.shadow.sample_rate 1.0
// each such answer is shadowed by exactly one cloud-small call after the client has its answer.
// Checks the request log's shadow line (figures, no text), the sim's request count, that the
// client's cost leaves the shadow out, the metrics, that a PII request never reaches the cloud,
// and that a shadow still in flight does not hold up a SIGTERM shutdown.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "integration/demo_intent_fixture.h"

namespace hengshi::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The value of one series in a Prometheus text page, or -1 when it is absent.
double metric_value(const std::string& page, const std::string& series) {
  std::istringstream lines(page);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

class GatewayShadowTest : public DemoIntentFixture {
 protected:
  void TearDown() override {
    GatewayFixture::TearDown();
    if (!policy_path_.empty()) std::remove(policy_path_.c_str());
  }

  // The demo model; with the default band {1.0, 0.0} every answer is in the middle band. Every
  // middle-band answer is shadowed (rate 1.0), and so is any "faq" task type outside the band.
  void start_shadowing(const std::string& middle_band_route, double high = 1.0,
                       GatewayOptions options = {}) {
    policy_path_ = temp_path("shadow-policy.yaml");
    std::ofstream(policy_path_) << "confidence:\n  default_band: {high: " << high
                                << ", low: 0.0}\n  middle_band_route: " << middle_band_route
                                << "\n";
    options.extra_yaml =
        "edge:\n  intent_model: " + *model_dir_ + "\nrouting:\n  policy_file: " + policy_path_ +
        "\nchain:\n  shadow:\n    sample_rate: 1.0\n    task_types: [faq]\n    timeout_ms: 5000\n";
    start(options);
  }

  std::string log_text() {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // The request log's lines with "shadow": true (or without, for `shadow` false).
  std::vector<json> log_lines(bool shadow) {
    std::vector<json> out;
    std::istringstream lines(log_text());
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      json record = json::parse(line);
      if (record.value("shadow", false) == shadow) out.push_back(std::move(record));
    }
    return out;
  }
  double metric(const std::string& series) {
    return metric_value(admin_get("/metrics").body, series);
  }

  std::string policy_path_;
};

TEST_F(GatewayShadowTest, AMiddleBandEdgeAnswerIsShadowedByOneCloudCallBilledApart) {
  start_shadowing("edge_verify");
  // The sim plays the judge ([[sim:reply=yes]] makes it answer exactly "yes") — and the shadow.
  auto reply = chat(user_message("auto", "我的订单到哪了 [[sim:reply=yes]]"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  ASSERT_EQ(meta["answered_by"], "edge_intent_verified") << meta.dump();
  ASSERT_EQ(meta["reason"], "middle_band_verify");
  const double billed = meta["cost"].get<double>();
  EXPECT_GT(billed, 0.0);  // the check

  ASSERT_TRUE(wait_until([&] { return metric("hengshi_shadow_total{outcome=\"ok\"}") == 1; }))
      << admin_get("/metrics").body;
  EXPECT_EQ(sim_requests(*small_), 2) << "the check, then exactly one shadow call";
  EXPECT_EQ(sim_requests(*large_), 0);

  ASSERT_TRUE(wait_until([&] { return log_lines(true).size() == 1; })) << log_text();
  const json shadow = log_lines(true)[0];
  EXPECT_EQ(shadow["id"], meta["request_id"]);
  EXPECT_EQ(shadow["outcome"], "ok");
  EXPECT_EQ(shadow["answered_by"], "edge_intent_verified");
  EXPECT_EQ(shadow["shadow_source"], "cloud-small");
  ASSERT_TRUE(shadow["similarity"].is_number()) << shadow.dump();
  EXPECT_GE(shadow["similarity"].get<double>(), 0.0);
  EXPECT_LT(shadow["similarity"].get<double>(), 0.5) << "\"yes\" is not the FAQ answer";
  EXPECT_EQ(shadow["agreement"], shadow["similarity"]);
  const double shadow_cost = shadow["shadow_cost"].get<double>();
  EXPECT_GT(shadow_cost, 0.0);
  EXPECT_GE(shadow["ms"].get<int>(), 0);

  // The shadow's cost is nowhere in what is billed: the request's log line, the metrics.
  auto requests = log_lines(false);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_DOUBLE_EQ(requests[0]["cost"].get<double>(), billed);
  EXPECT_NEAR(metric("hengshi_cost_total{pool=\"edge\"}"), billed, 1e-9);
  EXPECT_NEAR(metric("hengshi_shadow_cost_total"), shadow_cost, 1e-9);
  EXPECT_EQ(metric("hengshi_shadow_agreement_count"), 1);
  // Figures only: neither the question nor an answer reaches the log.
  const std::string log = log_text();
  EXPECT_EQ(log.find("我的订单"), std::string::npos) << log;
  EXPECT_EQ(log.find(reply.json()["choices"][0]["message"]["content"].get<std::string>()),
            std::string::npos)
      << log;
}

TEST_F(GatewayShadowTest, APiiRequestIsNeverShadowedToTheCloud) {
  // A confident edge answer (band high 0.5): the PII plan keeps its edge step and adds no cloud.
  start_shadowing("edge_verify", /*high=*/0.5);
  // "faq" is a shadowed task type, so only the PII rule keeps this request off the cloud.
  auto reply = chat(user_message("auto", "我的订单到哪了？我的手机号是13812345678"),
                    {{"X-Hengshi-Task-Type", "faq"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  EXPECT_EQ(meta["reason"], "pii_pin") << meta.dump();
  ASSERT_EQ(meta["answered_by"], "edge_intent") << meta.dump();
  ASSERT_TRUE(wait_until([&] {
    return metric("hengshi_shadow_total{outcome=\"skipped_pii\"}") == 1;
  })) << admin_get("/metrics").body;
  ASSERT_TRUE(wait_until([&] { return log_lines(true).size() == 1; })) << log_text();
  EXPECT_EQ(log_lines(true)[0]["outcome"], "skipped_pii");
  EXPECT_EQ(sim_requests(*small_), 0);
  EXPECT_EQ(sim_requests(*large_), 0);
  EXPECT_EQ(metric("hengshi_shadow_total{outcome=\"ok\"}"), -1) << "no shadow ran";
  EXPECT_EQ(log_text().find("13812345678"), std::string::npos);
}

TEST_F(GatewayShadowTest, AMiddleBandCloudAnswerIsComparedWithTheEdgePredictionWithoutACall) {
  start_shadowing("cloud-small");
  auto reply = chat(user_message("auto", "我的订单到哪了"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  ASSERT_EQ(meta["answered_by"], "cloud-small") << meta.dump();
  ASSERT_TRUE(wait_until([&] { return log_lines(true).size() == 1; })) << log_text();
  const json shadow = log_lines(true)[0];
  EXPECT_EQ(shadow["outcome"], "ok");
  EXPECT_EQ(shadow["shadow_source"], "edge_intent");
  EXPECT_TRUE(shadow["agreement"].is_number());
  EXPECT_EQ(shadow["shadow_cost"], 0.0);
  EXPECT_EQ(sim_requests(*small_), 1) << "the answer only: the edge side costs no call";
}

TEST_F(GatewayShadowTest, AHangingShadowDoesNotHoldUpShutdown) {
  // The member would wait 20 s and the shadow 5 s: only stop() can end the call sooner.
  GatewayOptions options;
  options.small_ttft_timeout_ms = 20000;
  options.small_total_timeout_ms = 20000;
  start_shadowing("edge_verify", /*high=*/0.5, options);
  // A confident edge answer, shadowed for its task type; the sim never answers the shadow.
  auto reply =
      chat(user_message("auto", "我的订单到哪了 [[sim:hang]]"), {{"X-Hengshi-Task-Type", "faq"}});
  ASSERT_EQ(reply.status, 200) << reply.body;
  ASSERT_EQ(reply.json()["hengshi"]["answered_by"], "edge_intent") << reply.body;
  ASSERT_TRUE(wait_until([&] { return sim_requests(*small_) == 1; }));
  const auto stopping = std::chrono::steady_clock::now();
  gateway_->signal(SIGTERM);
  auto exit_code = gateway_->wait(std::chrono::seconds(4));
  ASSERT_TRUE(exit_code.has_value()) << "a shadow in flight held up the shutdown";
  EXPECT_EQ(*exit_code, 0) << gateway_->output();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(3));
  auto shadows = log_lines(true);
  ASSERT_EQ(shadows.size(), 1u) << log_text();
  EXPECT_EQ(shadows[0]["outcome"], "cancelled");
}

}  // namespace
}  // namespace hengshi::testing
