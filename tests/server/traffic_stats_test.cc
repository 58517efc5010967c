#include "server/traffic_stats.h"

#include <gtest/gtest.h>

namespace hengshi::server {
namespace {

TEST(TrafficStatsTest, RatesOverNoSamplesAreNullNotZero) {
  obs::Registry registry;
  const auto stats = traffic_stats(registry);
  EXPECT_EQ(stats["requests"], 0.0);
  EXPECT_TRUE(stats["edge_fallback"]["rate"].is_null());
  EXPECT_TRUE(stats["shadow"]["false_fallback"]["rate"].is_null());
  EXPECT_EQ(stats["shadow"]["false_fallback"]["samples"], 0.0);
  EXPECT_TRUE(stats["cost"]["saved_share"].is_null());
}

TEST(TrafficStatsTest, SharesCostFallbacksAndShadowRatesComeFromTheMetrics) {
  obs::Registry registry;
  registry.counter("hengshi_answered_total", "", {{"by", "edge"}, {"kind", "model"}}).inc(6);
  registry.counter("hengshi_answered_total", "", {{"by", "cloud-small"}, {"kind", "model"}}).inc(3);
  registry.counter("hengshi_answered_total", "", {{"by", "gateway"}, {"kind", "canned"}}).inc(1);
  registry.counter("hengshi_cost_total", "", {{"pool", "cloud-small"}}).inc(2.0);
  registry.counter("hengshi_cost_all_cloud_large_total", "").inc(8.0);
  registry.counter("hengshi_edge_entered_total", "", {{"task_type", "faq"}}).inc(8);
  registry.counter("hengshi_edge_entered_total", "", {{"task_type", "billing"}}).inc(2);
  registry.counter("hengshi_edge_fallbacks_total", "", {{"fallback_type", "quality"}, {"task_type", "faq"}}).inc(2);
  registry.counter("hengshi_edge_fallbacks_total", "", {{"fallback_type", "timeout"}, {"task_type", "billing"}}).inc(1);
  registry.counter("hengshi_shadow_verdicts_total", "", {{"served", "cloud"}, {"verdict", "agree"}, {"task_type", "faq"}})
      .inc(1);
  registry.counter("hengshi_shadow_verdicts_total", "", {{"served", "cloud"}, {"verdict", "disagree"}, {"task_type", "faq"}})
      .inc(3);
  registry.counter("hengshi_shadow_verdicts_total", "", {{"served", "edge"}, {"verdict", "agree"}, {"task_type", "faq"}})
      .inc(9);
  for (double seconds : {0.001, 0.001, 0.002, 0.3}) {
    registry.histogram("hengshi_request_seconds", "", {{"route", "edge"}, {"level", "L0"}}).observe(seconds);
  }
  registry.histogram("hengshi_request_seconds", "", {{"route", "edge"}, {"level", "L2"}}).observe(0.4);

  const auto stats = traffic_stats(registry);
  EXPECT_EQ(stats["requests"], 10.0);
  EXPECT_EQ(stats["answers"]["model"], 9.0);
  EXPECT_EQ(stats["answers"]["canned"], 1.0);
  EXPECT_DOUBLE_EQ(stats["routes"]["edge"]["share"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(stats["cost"]["saved"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(stats["cost"]["saved_share"].get<double>(), 0.75);
  // 3 fallbacks over the 10 requests that entered the edge, not over all requests.
  EXPECT_DOUBLE_EQ(stats["edge_fallback"]["rate"].get<double>(), 0.3);
  EXPECT_EQ(stats["edge_fallback"]["entered"], 10.0);
  EXPECT_EQ(stats["edge_fallback"]["by_type"]["timeout"], 1.0);
  EXPECT_DOUBLE_EQ(stats["edge_fallback"]["by_task_type"]["billing"]["rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(stats["shadow"]["false_fallback"]["rate"].get<double>(), 0.25);
  EXPECT_EQ(stats["shadow"]["false_fallback"]["samples"], 4.0);
  EXPECT_DOUBLE_EQ(stats["shadow"]["missed_fallback"]["rate"].get<double>(), 0.0);
  EXPECT_EQ(stats["shadow"]["missed_fallback"]["samples"], 9.0);
  // Both levels of the edge route merged: 5 requests, p50 in the 1–2.5 ms bucket, p99 past 250 ms.
  EXPECT_EQ(stats["latency"]["edge"]["requests"], 5u);
  EXPECT_GT(stats["latency"]["edge"]["p50_ms"].get<double>(), 1.0);
  EXPECT_LE(stats["latency"]["edge"]["p50_ms"].get<double>(), 2.5);
  EXPECT_GT(stats["latency"]["edge"]["p99_ms"].get<double>(), 250.0);
}

}  // namespace
}  // namespace hengshi::server
