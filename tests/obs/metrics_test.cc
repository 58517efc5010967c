#include "obs/metrics.h"

#include <gtest/gtest.h>

namespace hengshi::obs {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndHistogramsInPrometheusFormat) {
  Registry registry;
  registry.counter("t_requests_total", "Requests", {{"route", "/x"}, {"status", "200"}}).inc(3);
  registry.gauge("t_in_flight", "In flight").set(2);
  auto& h = registry.histogram("t_latency_seconds", "Latency", {{"route", "/x"}}, {0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  std::string text = registry.render();
  EXPECT_NE(text.find("# TYPE t_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("t_requests_total{route=\"/x\",status=\"200\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_in_flight 2\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_bucket{route=\"/x\",le=\"0.10000000000000001\"} 1\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("t_latency_seconds_bucket{route=\"/x\",le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_bucket{route=\"/x\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("t_latency_seconds_count{route=\"/x\"} 3\n"), std::string::npos);
}

TEST(MetricsTest, SameLabelsReturnSameSeries) {
  Registry registry;
  auto& a = registry.counter("c_total", "c", {{"k", "v"}});
  auto& b = registry.counter("c_total", "c", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(registry.gauge("c_total", "c"), std::logic_error);
}

TEST(MetricsTest, EscapesLabelValues) {
  Registry registry;
  registry.counter("e_total", "e", {{"k", "a\"b\\c\nd"}}).inc();
  EXPECT_NE(registry.render().find(R"(e_total{k="a\"b\\c\nd"} 1)"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::obs
