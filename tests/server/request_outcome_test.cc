#include "server/request_outcome.h"

#include <gtest/gtest.h>

namespace hengshi::server {
namespace {

HopRecord hop(Source source, std::string outcome) {
  HopRecord h;
  h.source = source;
  h.outcome = std::move(outcome);
  return h;
}

ResponseMeta answered(Source by, AnswerKind kind, int level) {
  ResponseMeta meta;
  meta.answered_by = std::string(to_string(by));
  meta.answer_kind = kind;
  meta.level = level;
  return meta;
}

const TokenPrices kLarge{10.0, 30.0};  // per 1k

RequestOutcome outcome(const ResponseMeta& meta) {
  return outcome_of(meta, 200, "faq", 0.01, std::nullopt, 1000, 500, kLarge);
}

TEST(RequestOutcomeTest, AnEdgeAnswerEnteredTheEdgeAndDidNotFallBack) {
  ResponseMeta meta = answered(Source::edge_intent, AnswerKind::model, 0);
  meta.decision.route = Route::edge;
  meta.hops = {hop(Source::edge_intent, "ok")};
  const RequestOutcome out = outcome(meta);
  EXPECT_TRUE(out.entered_edge);
  EXPECT_EQ(out.fallback, "");
  EXPECT_EQ(out.answered_by, "edge");
  EXPECT_EQ(out.kind, "model");
  EXPECT_EQ(out.level, "L0");
  // 1000 prompt + 500 completion tokens at 10 / 30 per 1k: what cloud-large would have billed.
  EXPECT_DOUBLE_EQ(out.all_cloud_large_cost, 10.0 + 15.0);
}

TEST(RequestOutcomeTest, ALowConfidenceRequestEnteredTheEdgeAndFellBackForQuality) {
  ResponseMeta meta = answered(Source::cloud_small, AnswerKind::model, 2);
  meta.decision.route = Route::cloud_small;
  meta.decision.fallback_type = FallbackType::quality;
  meta.hops = {hop(Source::cloud_small, "ok")};
  const RequestOutcome out = outcome(meta);
  EXPECT_TRUE(out.entered_edge);
  EXPECT_EQ(out.fallback, "quality");
  EXPECT_EQ(out.answered_by, "cloud-small");
}

TEST(RequestOutcomeTest, ACapabilityMissNeverEnteredTheEdgeSoItDoesNotDiluteTheRate) {
  ResponseMeta meta = answered(Source::cloud_small, AnswerKind::model, 2);
  meta.decision.route = Route::cloud_small;
  meta.decision.fallback_type = FallbackType::capability;
  meta.hops = {hop(Source::cloud_small, "ok")};
  const RequestOutcome out = outcome(meta);
  EXPECT_FALSE(out.entered_edge);
  EXPECT_EQ(out.fallback, "");
}

TEST(RequestOutcomeTest, AnEdgeStepThatFailedAtRunTimeIsAnErrorFallback) {
  ResponseMeta meta = answered(Source::cloud_large, AnswerKind::model, 3);
  meta.decision.route = Route::edge;
  meta.hops = {hop(Source::edge_llm, "decode_failed"), hop(Source::cloud_large, "ok")};
  const RequestOutcome out = outcome(meta);
  EXPECT_TRUE(out.entered_edge);
  EXPECT_EQ(out.fallback, "error");
}

TEST(RequestOutcomeTest, ASkippedEdgeStepOrACacheHitEntersNothing) {
  ResponseMeta skipped = answered(Source::cloud_small, AnswerKind::model, 2);
  skipped.hops = {hop(Source::edge_llm, "skipped: offline"), hop(Source::cloud_small, "ok")};
  EXPECT_FALSE(outcome(skipped).entered_edge);

  ResponseMeta cached = answered(Source::cache, AnswerKind::model, 0);
  cached.decision.fallback_type = FallbackType::quality;
  EXPECT_FALSE(outcome(cached).entered_edge);
  EXPECT_EQ(outcome(cached).answered_by, "cache");
}

TEST(RequestOutcomeTest, DegradedAnswersAndErrorsAreKeptApartFromModelAnswers) {
  const RequestOutcome canned = outcome(answered(Source::last_resort_reply, AnswerKind::canned, 4));
  EXPECT_EQ(canned.kind, "canned");
  EXPECT_EQ(canned.answered_by, "gateway");
  EXPECT_EQ(canned.level, "L4");

  ResponseMeta failed;  // no answer at all: a 503 after every level failed
  const RequestOutcome error = outcome_of(failed, 503, "none", 0.2, std::nullopt, 0, 0, kLarge);
  EXPECT_EQ(error.kind, "error");
  EXPECT_EQ(error.answered_by, "none");
  EXPECT_EQ(error.level, "none");
  EXPECT_DOUBLE_EQ(error.all_cloud_large_cost, 0.0) << "no answer, nothing it would have cost";
}

}  // namespace
}  // namespace hengshi::server
