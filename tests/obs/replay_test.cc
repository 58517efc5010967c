#include "obs/replay.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace hengshi::obs {
namespace {

LoggedRequest logged(std::string id, std::string prompt, std::string answered_by, double cost) {
  LoggedRequest row;
  row.id = std::move(id);
  row.prompt = std::move(prompt);
  row.answered_by = std::move(answered_by);
  row.cost = cost;
  row.cost_all_cloud_large = 10 * cost + 1;
  return row;
}

// A candidate that reads "intent:confidence" out of the prompt, answering "A:<intent>".
ReplayInputs inputs_with_threshold(double high) {
  ReplayInputs in;
  in.predict = [](std::string_view text) {
    const auto colon = text.find(':');
    CandidateAnswer out;
    out.intent = std::string(text.substr(0, colon));
    out.confidence = std::stod(std::string(text.substr(colon + 1)));
    out.answer = "A:" + out.intent;
    out.out_of_scope = out.intent == "oos";
    return out;
  };
  in.edge_threshold = [high](std::string_view, std::string_view) { return high; };
  in.agree = [](std::string_view a, std::string_view b) { return a == b; };
  in.target_precision = 0.9;
  in.min_intent_rows = 2;
  return in;
}

TEST(ReplayTest, JudgesByLabelsCloudAnswersAndShadowsAndCountsWhatItCannotJudge) {
  std::vector<LoggedRequest> rows;
  rows.push_back(logged("1", "refund:0.95", "cloud-small", 1.0));  // label says refund: pass
  rows.push_back(logged("2", "refund:0.6", "cloud-small", 1.0));   // label says shipping: fail
  auto cloud = logged("3", "shipping:0.92", "cloud-large", 3.0);
  cloud.answer = "A:shipping";  // the cloud said what the candidate would: pass
  rows.push_back(cloud);
  auto shadowed = logged("4", "refund:0.99", "edge_intent", 0.0);
  shadowed.intent = "refund";
  shadowed.shadow_agree = false;  // the cloud disagreed with this edge answer: fail
  rows.push_back(shadowed);
  rows.push_back(logged("5", "refund:0.5", "cloud-small", 1.0));  // no reference at all
  auto no_text = logged("6", "", "cloud-small", 1.0);
  no_text.prompt.reset();
  rows.push_back(no_text);

  ReplayInputs in = inputs_with_threshold(0.9);
  in.labels_by_id = {{"1", "refund"}};
  in.labels_by_text = {{"refund:0.6", "shipping"}};
  const ReplayReport report = replay(rows, in);

  EXPECT_EQ(report.requests, 6u);
  EXPECT_EQ(report.with_text, 5u);
  EXPECT_EQ(report.referenced, 4u);
  EXPECT_EQ(report.reference_kinds.at("label"), 2u);
  EXPECT_EQ(report.reference_kinds.at("cloud_answer"), 1u);
  EXPECT_EQ(report.reference_kinds.at("shadow"), 1u);
  // At 0.9 the candidate keeps rows 1, 3, 4 at the edge (one of them fails: 4) and sends row 2
  // to the cloud (rightly: it would have failed).
  EXPECT_EQ(report.overall.missed_fallback.samples, 3u);
  EXPECT_EQ(report.overall.missed_fallback.hits, 1u);
  EXPECT_EQ(report.overall.false_fallback.samples, 1u);
  EXPECT_EQ(report.overall.false_fallback.hits, 0u);
  // Sorted by confidence: 0.99 fail, 0.95 pass, 0.92 pass, 0.6 fail — no cut reaches 0.9.
  EXPECT_FALSE(report.overall.chosen_threshold.has_value());
  // Route mix: production 1 edge + 5 cloud; the candidate moves rows 1 and 3 to the edge and
  // keeps the others (5 goes to the cloud: 0.5 < 0.9; 6 has no text and keeps its route).
  EXPECT_EQ(report.production.requests.at("edge"), 1u);
  EXPECT_EQ(report.candidate.requests.at("edge"), 3u);
  EXPECT_DOUBLE_EQ(report.production.cost, 7.0);
  EXPECT_DOUBLE_EQ(report.candidate.cost, 3.0) << "rows 2, 5 and 6 at their logged cost";
}

TEST(ReplayTest, TheChosenThresholdIsTheLowestWhosePassRateAboveItReachesTheTarget) {
  std::vector<LoggedRequest> rows;
  ReplayInputs in = inputs_with_threshold(0.5);
  const std::vector<std::pair<double, bool>> data = {
      {0.99, true}, {0.97, true}, {0.95, true}, {0.93, true}, {0.91, true},
      {0.89, true}, {0.87, true}, {0.85, true}, {0.83, true}, {0.70, false}, {0.60, false}};
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::string id = std::to_string(i);
    char prompt[32];
    std::snprintf(prompt, sizeof prompt, "faq:%.2f", data[i].first);
    rows.push_back(logged(id, prompt, "cloud-small", 1.0));
    in.labels_by_id[id] = data[i].second ? "faq" : "other";
  }
  const ReplayReport report = replay(rows, in);
  ASSERT_TRUE(report.overall.chosen_threshold.has_value());
  // 9 of 10 at >= 0.70 is exactly 0.9: the lowest cut that reaches it; 9 of 11 at 0.60 does not.
  EXPECT_DOUBLE_EQ(*report.overall.chosen_threshold, 0.70);
  EXPECT_NEAR(report.overall.chosen_share, 10.0 / 11.0, 1e-12);
  EXPECT_NEAR(report.overall.chosen_precision, 0.9, 1e-12);
  ASSERT_TRUE(report.intents.count("faq"));
  // The bins: 9 rows in [0.8, 1.0], all passing; [0.5, 0.7) and [0.7, 0.8) one failing row each.
  std::size_t binned = 0;
  for (const auto& bin : report.overall.bins) binned += bin.rows;
  EXPECT_EQ(binned, data.size());
  EXPECT_EQ(report.overall.answering, data.size());
  EXPECT_NE(format_report(report, 0.9).find("threshold 0.7000"), std::string::npos) << format_report(report, 0.9);
}

TEST(RequestLogReaderTest, JoinsShadowsByIdInEitherOrderAndCountsWhatItSkips) {
  std::istringstream log(
      "{\"schema\":1,\"shadow\":true,\"id\":\"b\",\"verdict\":\"agree\"}\n"
      "{\"schema\":1,\"id\":\"a\",\"answered_by\":\"edge_intent\",\"intent\":\"refund\",\"confidence\":0.9,"
      "\"cost\":0,\"text\":{\"prompt\":\"我要退款\",\"answer\":\"ok\"}}\n"
      "not json\n"
      "[1,2]\n"
      "{\"schema\":2,\"id\":\"z\"}\n"
      "{\"schema\":1,\"id\":\"b\",\"answered_by\":\"cloud-small\",\"cost\":0.5,\"figures\":{\"pii\":[\"phone\"]}}\n"
      "{\"schema\":1,\"shadow\":true,\"id\":\"a\",\"verdict\":\"disagree\"}\n");
  std::vector<LoggedRequest> rows;
  LogReadStats stats;
  read_request_log(log, rows, stats);
  EXPECT_EQ(stats.lines, 7u);
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.shadows, 2u);
  EXPECT_EQ(stats.malformed, 2u);
  EXPECT_EQ(stats.other_schema, 1u);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, "a");
  EXPECT_EQ(rows[0].prompt, "我要退款");
  EXPECT_EQ(rows[0].shadow_agree, false);
  EXPECT_TRUE(rows[0].edge_served());
  EXPECT_EQ(rows[1].shadow_agree, true) << "a shadow line before its request's is kept";
  EXPECT_TRUE(rows[1].pii);
  EXPECT_DOUBLE_EQ(rows[1].cost, 0.5);
}

TEST(RequestLogReaderTest, ALogAndItsRotatedPartReadAsOneLog) {
  // Rotation can put a request in FILE.1 and its shadow (written after the answer) in FILE.
  const std::string older = ::testing::TempDir() + "/reader_test.jsonl.1";
  const std::string newer = ::testing::TempDir() + "/reader_test.jsonl";
  std::ofstream(older) << "{\"schema\":1,\"id\":\"r1\",\"answered_by\":\"edge_intent\",\"cost\":0}\n";
  std::ofstream(newer) << "{\"schema\":1,\"shadow\":true,\"id\":\"r1\",\"verdict\":\"agree\"}\n";
  std::vector<LoggedRequest> rows;
  LogReadStats stats;
  ASSERT_TRUE(read_request_log_files({older, newer}, rows, stats).ok());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].shadow_agree, true);
  EXPECT_EQ(stats.shadows, 1u);
  auto missing = read_request_log_files({newer + ".absent"}, rows, stats);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot open the request log"), std::string::npos);
  std::remove(older.c_str());
  std::remove(newer.c_str());
}

}  // namespace
}  // namespace hengshi::obs
