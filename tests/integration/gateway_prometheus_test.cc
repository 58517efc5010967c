// A real Prometheus (Debian's) scrapes a gateway under real traffic on loopback, and PromQL over
// the scraped series gives what the gateway's own /admin/stats says: the request count, the share
// of model answers, the edge fallback rate over the requests that entered the edge, and latency
// quantiles from the histograms. So dashboards and alerts built on the metrics read the truth.
#include <gtest/gtest.h>

#include <fstream>

#include "integration/demo_intent_fixture.h"
#include "support/prometheus_server.h"

namespace hengshi::testing {
namespace {

using nlohmann::json;

class GatewayPrometheusTest : public DemoIntentFixture {
 protected:
  void TearDown() override {
    GatewayFixture::TearDown();
    if (!policy_path_.empty()) std::remove(policy_path_.c_str());
  }
  std::string policy_path_;
};

TEST_F(GatewayPrometheusTest, PromQLOverTheScrapedSeriesGivesTheGatewaysOwnRates) {
  // The edge answers what it is sure of (high 0.5); the rest falls back to cloud-small.
  policy_path_ = temp_path("prometheus-policy.yaml");
  std::ofstream(policy_path_) << "confidence:\n  default_band: {high: 0.5, low: 0.0}\n";
  GatewayOptions options;
  options.extra_yaml = "edge:\n  intent_model: " + *model_dir_ + "\nrouting:\n  policy_file: " + policy_path_ + "\n";
  start(options);
  PrometheusServer prometheus(gateway_->admin_port());

  const std::vector<std::string> questions = {"我的订单到哪了", "我要退款",   "运费多少",      "忘记密码了",
                                              "客服几点上班",   "转账限额多少", "今天天气怎么样", "给我讲个笑话吧"};
  for (const auto& question : questions) ASSERT_EQ(chat(user_message("auto", question)).status, 200);
  const double n = static_cast<double>(questions.size());
  // A request's outcome is recorded once its answer is written, so the last one may land just
  // after the client has read it.
  json stats;
  ASSERT_TRUE(wait_until([&] {
    stats = admin_get("/admin/stats").json();
    return stats["requests"] == n;
  })) << stats.dump(2);

  // Prometheus scrapes every second: wait until it has seen every request.
  ASSERT_TRUE(wait_until([&] { return prometheus.query("sum(hengshi_answered_total)") == n; },
                         std::chrono::seconds(20)))
      << "last: " << prometheus.query("sum(hengshi_answered_total)").value_or(-1);

  EXPECT_EQ(prometheus.query("sum(hengshi_requests_total{status=\"200\"})"), n);
  EXPECT_EQ(prometheus.query("sum(hengshi_answered_total{kind=\"model\"}) / sum(hengshi_answered_total)"),
            stats["answers"]["model"].get<double>() / n);
  const auto fallback_rate = prometheus.query("sum(hengshi_edge_fallbacks_total) / sum(hengshi_edge_entered_total)");
  ASSERT_TRUE(fallback_rate.has_value());
  EXPECT_DOUBLE_EQ(*fallback_rate, stats["edge_fallback"]["rate"].get<double>()) << stats.dump(2);
  EXPECT_GT(*fallback_rate, 0.0) << "the weather and the joke are not FAQ questions";
  EXPECT_LT(*fallback_rate, 1.0);
  const auto edge_share = prometheus.query("sum(hengshi_answered_total{by=\"edge\"}) / sum(hengshi_answered_total)");
  EXPECT_DOUBLE_EQ(edge_share.value_or(-1), stats["routes"]["edge"]["share"].get<double>());
  // Latency quantiles from the scraped buckets, as a Grafana panel would compute them.
  const auto p50 = prometheus.query("histogram_quantile(0.5, sum by (le) (hengshi_request_seconds_bucket))");
  ASSERT_TRUE(p50.has_value());
  EXPECT_GT(*p50, 0.0);
  EXPECT_LT(*p50, 5.0);
  EXPECT_EQ(prometheus.query("max(hengshi_offline)").value_or(-1), 0.0);
}

}  // namespace
}  // namespace hengshi::testing
