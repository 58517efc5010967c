// The regression gate's comparison: a candidate no worse than the baseline beyond the
// tolerances passes; each way it is worse is named.
#include "edge/gate_verdict.h"

#include <gtest/gtest.h>

namespace hengshi::edge {
namespace {

GateSide side(double f1, double speed) {
  GateSide s;
  s.f1 = f1;
  s.tokens_per_second = speed;
  return s;
}

TEST(LlmGateTest, PassesWithinTheTolerances) {
  const GateTolerance tolerance{0.02, 0.25};
  EXPECT_TRUE(judge(side(0.60, 100), side(0.60, 100), tolerance).passed);
  EXPECT_TRUE(judge(side(0.585, 80), side(0.60, 100), tolerance).passed);  // just inside both
  EXPECT_TRUE(judge(side(0.90, 300), side(0.60, 100), tolerance).passed);  // better
}

TEST(LlmGateTest, NamesEachWayTheCandidateIsWorse) {
  const GateTolerance tolerance{0.02, 0.25};
  const auto worse_answers = judge(side(0.50, 100), side(0.60, 100), tolerance);
  EXPECT_FALSE(worse_answers.passed);
  ASSERT_EQ(worse_answers.reasons.size(), 1u);
  EXPECT_NE(worse_answers.reasons[0].find("F1 0.500"), std::string::npos) << worse_answers.reasons[0];

  const auto slower = judge(side(0.60, 70), side(0.60, 100), tolerance);
  EXPECT_FALSE(slower.passed);
  ASSERT_EQ(slower.reasons.size(), 1u);
  EXPECT_NE(slower.reasons[0].find("tok/s"), std::string::npos);

  EXPECT_EQ(judge(side(0.1, 10), side(0.6, 100), tolerance).reasons.size(), 2u);
  // No speed measured for the baseline: speed is not judged.
  EXPECT_TRUE(judge(side(0.6, 1), side(0.6, 0), tolerance).passed);
}

TEST(LlmGateTest, IntentAgreementAndRefusalsAreJudgedWhenBothSidesHaveThem) {
  const GateTolerance tolerance{0.02, 0.25, 0.05, 0.05};
  GateSide good = side(0.6, 100), bad = side(0.6, 100);
  good.intent_agreement = 0.9;
  bad.intent_agreement = 0.5;
  const auto confused = judge(bad, good, tolerance);
  EXPECT_FALSE(confused.passed);
  ASSERT_EQ(confused.reasons.size(), 1u);
  EXPECT_NE(confused.reasons[0].find("intent agreement 0.500"), std::string::npos) << confused.reasons[0];

  bad.intent_agreement = 0.88;  // within the tolerance
  good.refusal_rate = 0.8;
  bad.refusal_rate = 0.2;
  const auto answers_anything = judge(bad, good, tolerance);
  EXPECT_FALSE(answers_anything.passed);
  ASSERT_EQ(answers_anything.reasons.size(), 1u);
  EXPECT_NE(answers_anything.reasons[0].find("out-of-scope refusals 0.200"), std::string::npos);
  bad.refusal_rate = -1;  // not measured on one side: not judged
  EXPECT_TRUE(judge(bad, good, tolerance).passed);
}

FinetuneRow row(const std::string& question, const std::string& answer, const std::string& intent) {
  FinetuneRow r;
  r.messages = {{"user", question}, {"assistant", answer}};
  r.intent = intent;
  return r;
}

TEST(LlmGateTest, TheSetSplitsOutOfScopeRowsAndScoresAgreementAndRefusals) {
  FinetuneData data;
  data.rows = {row("where is my order", "Open My Orders to see where your parcel is.", "order"),
               row("track my parcel", "Open My Orders to see where your parcel is.", "order"),
               row("refund please", "Ask for a refund from the order page.", "refund"),
               row("tell me a joke", "Sorry, I cannot help with that.", "__oos__")};
  data.out_of_scope = {row("weather today", "", "__oos__")};
  const GateSet set = make_gate_set(data, "ignored: the data gives its own");
  ASSERT_EQ(set.in_scope.size(), 3u);
  ASSERT_EQ(set.out_of_scope.size(), 2u);
  EXPECT_EQ(set.refusal, "Sorry, I cannot help with that.");
  ASSERT_EQ(set.intent_answers.size(), 2u);

  // Answers nearest their own intent's answer agree, even when not exact.
  EXPECT_DOUBLE_EQ(intent_agreement(set, {"Open My Orders to see your parcel.", "Open My Orders.",
                                          "Ask for a refund."}),
                   1.0);
  EXPECT_NEAR(intent_agreement(set, {"Ask for a refund from the order page.", "Open My Orders.",
                                     "Open My Orders to see where your parcel is."}),
              1.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(refusal_rate(set, {"Sorry, I cannot help with that.", "Open My Orders."}), 0.5);
  EXPECT_TRUE(is_refusal("Sorry, I cannot help.", set.refusal));
  EXPECT_FALSE(is_refusal("anything", ""));

  // Without a refusal text or a second intent, those figures are not measured.
  FinetuneData plain;
  plain.rows = {row("where is my order", "Open My Orders.", "order")};
  plain.out_of_scope = {row("weather today", "", "__oos__")};
  const GateSet unmeasured = make_gate_set(plain, "");
  EXPECT_EQ(refusal_rate(unmeasured, {"x"}), -1);
  EXPECT_EQ(intent_agreement(unmeasured, {"Open My Orders."}), -1);
  EXPECT_EQ(make_gate_set(plain, "Sorry.").refusal, "Sorry.");
}

TEST(LlmGateTest, WithAnIntentEngineAgreementIsJudgedAgainstItsPredictions) {
  FinetuneData data;
  data.rows = {row("where is my order", "Open My Orders to see where your parcel is.", "order"),
               row("my parcel never came, refund it", "Ask for a refund from the order page.", "order"),
               row("refund please", "Ask for a refund from the order page.", "refund"),
               row("sing me a song", "Open My Orders to see where your parcel is.", "order")};
  const GateSet by_labels = make_gate_set(data, "");
  GateSet set = by_labels;
  // The engine reads the second question as a refund, and calls the last one out of scope.
  std::vector<std::string> asked;
  use_intent_reference(
      set,
      [&](std::string_view question) -> std::string {
        asked.emplace_back(question);
        if (question.find("refund") != std::string_view::npos) return "refund";
        if (question.find("song") != std::string_view::npos) return "__oos__";
        return "order";
      },
      "intent model v1");
  EXPECT_EQ(asked.size(), 4u) << "one prediction per in-scope question";
  EXPECT_EQ(set.reference_intents, (std::vector<std::string>{"order", "refund", "refund", ""}));
  const std::vector<std::string> answers = {"Open My Orders.", "Ask for a refund.", "Ask for a refund.",
                                            "Open My Orders."};
  // Against the labels the second answer disagrees; against the engine it agrees, and the row the
  // engine would not answer is not judged.
  EXPECT_DOUBLE_EQ(intent_agreement(by_labels, answers), 3.0 / 4);
  EXPECT_DOUBLE_EQ(intent_agreement(set, answers), 1.0);
  const GateSide side;
  EXPECT_EQ(gate_json("gate.jsonl", set, {}, side, side, {})["intent_reference"], "intent model v1");
  EXPECT_EQ(gate_json("gate.jsonl", by_labels, {}, side, side, {})["intent_reference"], "labels");
}

}  // namespace
}  // namespace hengshi::edge
