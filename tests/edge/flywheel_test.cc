#include "edge/flywheel.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace hengshi::edge {
namespace {

obs::LoggedRequest cloud_answer(std::string id, std::string prompt, std::string answer, bool agreed) {
  obs::LoggedRequest row;
  row.id = std::move(id);
  row.answered_by = "cloud-small";
  row.answer_kind = "model";
  row.status = 200;
  row.intent = "refund";
  row.prompt = std::move(prompt);
  row.answer = std::move(answer);
  row.shadow_agree = agreed;
  return row;
}

FlywheelOptions options(double share) {
  FlywheelOptions o;
  o.review_share = share;
  o.has_pii = [](std::string_view text) { return text.find("138") != std::string_view::npos; };
  o.normalise = [](std::string_view text) {
    std::string out;
    for (char c : text) {
      if (c != ' ' && c != '?') out += c;
    }
    return out;
  };
  return o;
}

TEST(FlywheelTest, OnlyGoodPiiFreeDistinctCloudAnswersBecomeRowsAndOnlyAgreedOnesGetAnIntent) {
  std::vector<obs::LoggedRequest> log;
  log.push_back(cloud_answer("1", "refund please", "Go to orders", true));
  log.push_back(cloud_answer("2", "refund please?", "Go to orders", true));     // a duplicate
  log.push_back(cloud_answer("3", "call 13800000000", "ok", true));             // PII in the question
  log.push_back(cloud_answer("4", "refund", "call 13800000000", true));         // PII in the answer
  log.push_back(cloud_answer("5", "what is the weather", "sunny", false));      // no agreed intent
  auto edge = cloud_answer("6", "edge", "x", true);
  edge.answered_by = "edge_intent";  // the edge's own answer teaches it nothing
  log.push_back(edge);
  auto canned = cloud_answer("7", "busy", "x", true);
  canned.answer_kind = "canned";
  log.push_back(canned);
  auto streamed = cloud_answer("8", "stream", "", true);
  streamed.answer.reset();  // a stream's text is not kept
  log.push_back(streamed);

  const FlywheelExport selected = select_flywheel_rows(log, options(0.05));
  EXPECT_EQ(selected.considered, 5u);
  EXPECT_EQ(selected.dropped_duplicates, 1u);
  EXPECT_EQ(selected.dropped_pii, 2u);
  ASSERT_EQ(selected.rows.size(), 1u);
  EXPECT_EQ(selected.rows[0].intent, "refund");
  ASSERT_EQ(selected.unlabelled.size(), 1u);
  EXPECT_EQ(selected.unlabelled[0].text, "what is the weather");
  EXPECT_EQ(selected.review.size(), 1u) << "at least one row is reviewed";
}

TEST(FlywheelTest, TheReviewSampleIsAtLeastTheShareAndTheStateReadsBack) {
  std::vector<obs::LoggedRequest> log;
  for (int i = 0; i < 40; ++i) log.push_back(cloud_answer(std::to_string(i), "q" + std::to_string(i), "a", true));
  const FlywheelExport selected = select_flywheel_rows(log, options(0.1));
  EXPECT_EQ(selected.review.size(), 4u);
  EXPECT_EQ(select_flywheel_rows(log, options(0.1)).review, selected.review) << "seeded: the same sample";

  const std::string path = ::testing::TempDir() + "/flywheel_test.jsonl";
  ASSERT_TRUE(write_flywheel_export(selected, path).ok());
  auto state = read_review_state(path);
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->is_export);
  EXPECT_EQ(state->sampled, 4u);
  EXPECT_EQ(state->reviewed, 0u);

  // A person marks one bad and the rest ok: reviewed, and the bad text is known.
  std::ofstream(review_path_of(path), std::ios::trunc)
      << "{\"text\":\"q1\",\"verdict\":\"bad\"}\n{\"text\":\"q2\",\"verdict\":\"ok\"}\n";
  state = read_review_state(path);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->reviewed, 2u);
  EXPECT_EQ(state->bad_texts, std::set<std::string>{"q1"});
  std::ofstream(review_path_of(path), std::ios::trunc) << "{\"text\":\"q1\",\"verdict\":\"maybe\"}\n";
  EXPECT_FALSE(read_review_state(path).ok()) << "only ok, bad or null";

  EXPECT_FALSE(read_review_state(path + ".none")->is_export) << "plain data has no review file";
  for (const char* suffix : {"", ".review.jsonl", ".unlabelled.jsonl"}) std::remove((path + suffix).c_str());
}

}  // namespace
}  // namespace hengshi::edge
