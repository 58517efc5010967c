// Shrinkage toward the parent's band, Wilson bounds and prior-shift reweighting (threshold_fit.h).
// fit_band itself is tested in thresholds_test.cc.
#include "router/threshold_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "support/text_checks.h"

namespace hengshi::router {
namespace {

constexpr double kZ = 1.6448536269514722;  // one-sided 95%: the standard normal's 0.95 quantile

using testing::contains;  // support/text_checks.h

// `count` predictions of `intent` at `confidence`, `passes` of them right (the rest are truly
// "other"), task type faq.
void add_rows(std::vector<LabelledPrediction>& rows, double confidence, int count, int passes,
              const std::string& intent = "refund") {
  for (int i = 0; i < count; ++i) {
    rows.push_back(
        LabelledPrediction{"faq", i < passes ? intent : "other", intent, confidence, false});
  }
}

// `count` out-of-scope rows the model answers as `intent` at `confidence`.
void add_oos_answered(std::vector<LabelledPrediction>& rows, double confidence, int count,
                      const std::string& intent = "refund") {
  for (int i = 0; i < count; ++i) {
    rows.push_back(
        LabelledPrediction{"faq", std::string(kOutOfScopeIntent), intent, confidence, false});
  }
}

// `count` out-of-scope rows the model itself calls out of scope (never answered).
void add_oos_refused(std::vector<LabelledPrediction>& rows, int count) {
  for (int i = 0; i < count; ++i) {
    rows.push_back(LabelledPrediction{"faq", std::string(kOutOfScopeIntent),
                                      std::string(kOutOfScopeIntent), 0.3, true});
  }
}

const Band kParent{0.8, 0.4};

TEST(WilsonBoundTest, ClosedFormsAtTheEnds) {
  // p = 1: lower = n / (n + z^2); p = 0: upper = z^2 / (n + z^2).
  EXPECT_NEAR(wilson_lower_bound(1.0, 20), 20 / (20 + kZ * kZ), 1e-9);
  EXPECT_NEAR(wilson_upper_bound(0.0, 5), kZ * kZ / (5 + kZ * kZ), 1e-9);
  EXPECT_DOUBLE_EQ(wilson_upper_bound(1.0, 20), 1.0);
  EXPECT_DOUBLE_EQ(wilson_lower_bound(0.0, 5), 0.0);
  // No evidence: nothing ruled out.
  EXPECT_DOUBLE_EQ(wilson_lower_bound(0.5, 0), 0.0);
  EXPECT_DOUBLE_EQ(wilson_upper_bound(0.5, 0), 1.0);
  // The interval holds the estimate and narrows with more evidence.
  EXPECT_LT(wilson_lower_bound(0.9, 100), 0.9);
  EXPECT_GT(wilson_upper_bound(0.9, 100), 0.9);
  EXPECT_GT(wilson_upper_bound(0.9, 100) - wilson_lower_bound(0.9, 100),
            wilson_upper_bound(0.9, 1000) - wilson_lower_bound(0.9, 1000));
}

TEST(ShrinkBandTest, TwentyPerfectRowsInheritTheParent) {
  // All right, half of them under the parent's high: 20 of 20 only shows precision >= 0.88.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.9, 10, 10);
  add_rows(rows, 0.6, 10, 10);
  const ShrinkResult shrunk = shrink_band(rows, kParent, 0.97, 20);
  EXPECT_EQ(shrunk.rule, BandRule::inherited_consistent);
  EXPECT_TRUE(is_inherited(shrunk.rule));
  EXPECT_DOUBLE_EQ(shrunk.band.high, kParent.high);
  EXPECT_DOUBLE_EQ(shrunk.band.low, kParent.low);
  EXPECT_TRUE(contains(shrunk.reason, "inherited: evidence consistent with parent"))
      << shrunk.reason;
  EXPECT_EQ(shrunk.at_parent_high.rows, 10u);
  EXPECT_DOUBLE_EQ(shrunk.precision_at_high, 1.0);
  EXPECT_DOUBLE_EQ(shrunk.coverage_at_high, 0.5);
  // The fit alone would have answered from 0.6 (20 of 20 meets 0.97 as a point estimate).
  EXPECT_DOUBLE_EQ(shrunk.fit.high, 0.6);

  // Fewer rows than min support: named as too few.
  rows.resize(18);
  const ShrinkResult few = shrink_band(rows, kParent, 0.97, 20);
  EXPECT_EQ(few.rule, BandRule::inherited_too_few);
  EXPECT_TRUE(contains(few.reason, "inherited: n=18 too few")) << few.reason;
  EXPECT_DOUBLE_EQ(few.band.high, kParent.high);
}

TEST(ShrinkBandTest, OneMissInTwentyIsNoEvidenceAgainstTheParent) {
  // The case: fit_band alone finds no threshold at 0.97 with 20 answers (19/20) and
  // switches the edge off; the group's rows cannot show it below target, so it inherits.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.95, 15, 14);
  add_rows(rows, 0.6, 5, 5);
  EXPECT_DOUBLE_EQ(fit_band(rows, 0.97, 20).high, kEdgeNever);
  const ShrinkResult shrunk = shrink_band(rows, kParent, 0.97, 20);
  EXPECT_TRUE(is_inherited(shrunk.rule)) << shrunk.reason;
  EXPECT_DOUBLE_EQ(shrunk.band.high, kParent.high);
  EXPECT_GE(wilson_upper_bound(14.0 / 15, 15), 0.97);
}

TEST(ShrinkBandTest, TwoHundredRowsAtNinetyPercentAreMadeStricter) {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.95, 100, 99);
  add_rows(rows, 0.85, 100, 81);  // 180 / 200 = 0.90 at the parent's high
  const ShrinkResult shrunk = shrink_band(rows, kParent, 0.97, 20);
  EXPECT_EQ(shrunk.rule, BandRule::stricter);
  EXPECT_FALSE(is_inherited(shrunk.rule));
  // The lowest threshold above the parent's where its own precision meets 0.97: 99/100 at 0.95.
  EXPECT_DOUBLE_EQ(shrunk.band.high, 0.95);
  EXPECT_LE(shrunk.band.low, shrunk.band.high);
  EXPECT_DOUBLE_EQ(shrunk.precision_at_high, 0.99);
  EXPECT_DOUBLE_EQ(shrunk.coverage_at_high, 0.5);
  EXPECT_DOUBLE_EQ(shrunk.at_parent_high.precision(), 0.9);
  EXPECT_DOUBLE_EQ(shrunk.at_parent_high.effective_n(), 200);
  const double upper = wilson_upper_bound(0.9, 200);
  EXPECT_LT(upper, 0.97);
  char expected[96];
  std::snprintf(expected, sizeof expected,
                "stricter: Wilson upper %.3f < 0.970 at parent high 0.800", upper);
  EXPECT_TRUE(contains(shrunk.reason, expected)) << shrunk.reason;
  EXPECT_TRUE(contains(shrunk.reason, "high 0.950")) << shrunk.reason;

  // Nowhere good enough: the edge is switched off for the group, on evidence.
  std::vector<LabelledPrediction> bad;
  add_rows(bad, 0.95, 100, 90);
  add_rows(bad, 0.85, 100, 90);
  const ShrinkResult off = shrink_band(bad, kParent, 0.97, 20);
  EXPECT_EQ(off.rule, BandRule::stricter);
  EXPECT_DOUBLE_EQ(off.band.high, kEdgeNever);
  EXPECT_DOUBLE_EQ(off.coverage_at_high, 0.0);
  EXPECT_TRUE(contains(off.reason, "edge never")) << off.reason;
}

// Loosening picks the groups that look best on the calibration rows; with bounds its level is
// corrected for how many sibling groups had the chance, so evidence that would loosen one group
// alone does not loosen one of ten.
TEST(ShrinkBandTest, LooseningAmongSiblingsNeedsBonferroniEvidence) {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.95, 20, 20);
  add_rows(rows, 0.7, 100, 100);
  add_rows(rows, 0.5, 50, 30);
  const ShrinkResult alone = shrink_band(rows, kParent, 0.97, 20, 0.9, 1);
  EXPECT_EQ(alone.rule, BandRule::looser) << alone.reason;
  EXPECT_DOUBLE_EQ(alone.band.high, 0.7);
  EXPECT_TRUE(contains(alone.reason, "(at 90.00%)")) << alone.reason;
  EXPECT_GE(wilson_lower_bound(1.0, 120, 0.9), 0.97);

  const ShrinkResult one_of_ten = shrink_band(rows, kParent, 0.97, 20, 0.9, 10);
  EXPECT_TRUE(is_inherited(one_of_ten.rule)) << one_of_ten.reason;
  EXPECT_DOUBLE_EQ(one_of_ten.band.high, kParent.high);
  EXPECT_LT(wilson_lower_bound(1.0, 120, 0.99), 0.97);

  // Point estimates (confidence 0) keep the 95% decision whatever the siblings.
  EXPECT_EQ(shrink_band(rows, kParent, 0.97, 20, 0.0, 10).rule, BandRule::looser);
}

TEST(ShrinkBandTest, StrongEvidenceAboveTargetMakesItLooser) {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.95, 50, 50);
  add_rows(rows, 0.7, 300, 300);
  add_rows(rows, 0.5, 50, 30);
  const ShrinkResult shrunk = shrink_band(rows, kParent, 0.97, 20);
  EXPECT_EQ(shrunk.rule, BandRule::looser);
  EXPECT_DOUBLE_EQ(shrunk.band.high, 0.7);
  const double lower = wilson_lower_bound(1.0, 350);
  EXPECT_GE(lower, 0.97);
  char expected[96];
  std::snprintf(expected, sizeof expected, "looser: Wilson lower %.3f (at 95.00%%) >= 0.970 at 0.700", lower);
  EXPECT_TRUE(contains(shrunk.reason, expected)) << shrunk.reason;
  EXPECT_DOUBLE_EQ(shrunk.coverage_at_high, 350.0 / 400);
  EXPECT_LE(shrunk.band.low, shrunk.band.high);

  // The same pattern on 30 rows shows too little to loosen (30/30 → Wilson lower 0.92).
  std::vector<LabelledPrediction> thin;
  add_rows(thin, 0.95, 5, 5);
  add_rows(thin, 0.7, 25, 25);
  EXPECT_TRUE(is_inherited(shrink_band(thin, kParent, 0.97, 20).rule));

  // A parent that never answers can still be loosened, and is otherwise kept.
  const Band never{kEdgeNever, 0.5};
  EXPECT_DOUBLE_EQ(shrink_band(rows, never, 0.97, 20).band.high, 0.7);
  const ShrinkResult kept = shrink_band(thin, never, 0.97, 20);
  EXPECT_TRUE(is_inherited(kept.rule));
  EXPECT_DOUBLE_EQ(kept.band.high, kEdgeNever);
  EXPECT_TRUE(contains(kept.reason, "no answers at parent high")) << kept.reason;
}

TEST(ShrinkBandTest, StricterWinsOverLooser) {
  // Bad at the top, good lower down: the rows say the parent's high answers badly.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.95, 40, 20);
  add_rows(rows, 0.6, 2000, 2000);
  const ShrinkResult shrunk = shrink_band(rows, kParent, 0.97, 20);
  EXPECT_EQ(shrunk.rule, BandRule::stricter);
  EXPECT_DOUBLE_EQ(shrunk.band.high, kEdgeNever);
}

TEST(PriorShiftTest, ReweightingMatchesTheFormula) {
  // 100 in-scope rows answered at 98%, 10 out-of-scope rows answered, 10 refused: s0 = 20/120.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.9, 100, 98);
  add_oos_answered(rows, 0.9, 10);
  add_oos_refused(rows, 10);
  EXPECT_NEAR(oos_share_of(rows), 20.0 / 120, 1e-12);
  EXPECT_NEAR(answered_at_or_above(rows, 0.9).precision(), 98.0 / 110, 1e-12);

  ASSERT_TRUE(reweight_to_oos_share(rows, 0.3));
  EXPECT_NEAR(oos_share_of(rows), 0.3, 1e-12);
  // Out of scope S/s0 = 0.3 * 6 = 1.8; in scope (1-S)/(1-s0) = 0.7 * 1.2 = 0.84.
  EXPECT_NEAR(rows.front().weight, 0.84, 1e-12);
  EXPECT_NEAR(rows.back().weight, 1.8, 1e-12);
  const Tally tally = answered_at_or_above(rows, 0.9);
  // precision(S) = (1-S) q / ((1-S) c + S L), q = 0.98, c = 1, L = 10/20.
  const double expected = 0.7 * 0.98 / (0.7 * 1.0 + 0.3 * 0.5);
  EXPECT_NEAR(tally.precision(), expected, 1e-12);
  EXPECT_NEAR(tally.precision(), 98 * 0.84 / (100 * 0.84 + 10 * 1.8), 1e-12);
  EXPECT_EQ(tally.rows, 110u);
  // Kish: (sum w)^2 / sum w^2.
  const double sum = 100 * 0.84 + 10 * 1.8;
  const double sum_squared = 100 * 0.84 * 0.84 + 10 * 1.8 * 1.8;
  EXPECT_NEAR(tally.effective_n(), sum * sum / sum_squared, 1e-9);
  EXPECT_LT(tally.effective_n(), 110.0);

  // fit_band sees the same weighted precision: at a target of 0.8 it still answers from 0.9,
  // at 0.85 it no longer can.
  const FitResult fit = fit_band(rows, 0.8, 20);
  EXPECT_DOUBLE_EQ(fit.high, 0.9);
  EXPECT_NEAR(fit.precision_at_high, expected, 1e-12);
  EXPECT_DOUBLE_EQ(fit_band(rows, 0.85, 20).high, kEdgeNever);

  // The data's own share gives weight 1 back.
  ASSERT_TRUE(reweight_to_oos_share(rows, 20.0 / 120));
  EXPECT_NEAR(answered_at_or_above(rows, 0.9).precision(), 98.0 / 110, 1e-12);
}

TEST(PriorShiftTest, RefusesAShareItCannotReach) {
  std::vector<LabelledPrediction> in_scope_only;
  add_rows(in_scope_only, 0.9, 30, 30);
  const Status none = reweight_to_oos_share(in_scope_only, 0.2);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, "invalid_argument");
  EXPECT_TRUE(contains(none.error().message, "needs out-of-scope rows")) << none.error().message;
  EXPECT_TRUE(contains(none.error().message, "__oos__")) << none.error().message;
  EXPECT_TRUE(reweight_to_oos_share(in_scope_only, 0.0));  // nothing to shift: weights stay 1
  EXPECT_DOUBLE_EQ(in_scope_only.front().weight, 1.0);

  std::vector<LabelledPrediction> mixed = in_scope_only;
  add_oos_refused(mixed, 3);
  for (double share : {-0.1, 1.0, 1.5, std::nan("")}) {
    EXPECT_FALSE(reweight_to_oos_share(mixed, share)) << share;
  }
  std::vector<LabelledPrediction> oos_only;
  add_oos_refused(oos_only, 3);
  EXPECT_FALSE(reweight_to_oos_share(oos_only, 0.5));
}

TEST(IntentPriorTest, InScopeWeightSplitsOverIntentsAsThePriorSays) {
  // refund: 100 rows, all right. hours: 100 rows, 20 of them mistaken for refund. All at 0.9.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.9, 100, 100, "refund");
  for (int i = 0; i < 80; ++i) rows.push_back(LabelledPrediction{"faq", "hours", "hours", 0.9, false});
  for (int i = 0; i < 20; ++i) rows.push_back(LabelledPrediction{"faq", "hours", "refund", 0.9, false});
  add_oos_refused(rows, 10);
  EXPECT_NEAR(answered_at_or_above(rows, 0.9).precision(), 180.0 / 200, 1e-12);

  // Traffic asks refund three times as often as hours (any scale: the shares are normalised).
  ASSERT_TRUE(reweight_to_intent_prior(rows, {{"refund", 30}, {"hours", 10}, {"unused", 5}}));
  double refund = 0, hours = 0, out_of_scope = 0;
  for (const auto& row : rows) {
    (row.intent_true == "refund" ? refund : row.intent_true == "hours" ? hours : out_of_scope) += row.weight;
  }
  EXPECT_NEAR(refund, 150, 1e-9);  // the in-scope total (200) kept, split 3:1
  EXPECT_NEAR(hours, 50, 1e-9);
  EXPECT_NEAR(out_of_scope, 10, 1e-12);  // out-of-scope rows untouched
  EXPECT_NEAR(oos_share_of(rows), 10.0 / 210, 1e-12);
  // The refund band's precision is now the traffic's: 150 right against 20 hours rows at 0.5.
  std::vector<LabelledPrediction> predicted_refund;
  for (const auto& row : rows) {
    if (row.intent_predicted == "refund") predicted_refund.push_back(row);
  }
  EXPECT_NEAR(answered_at_or_above(predicted_refund, 0.9).precision(), 150.0 / 160, 1e-12);
  EXPECT_NEAR(answered_at_or_above(rows, 0.9).precision(), (150.0 + 40) / 200, 1e-12);

  // An intent the prior lacks weighs 0; the rest keep the in-scope total.
  ASSERT_TRUE(reweight_to_intent_prior(rows, {{"refund", 1}}));
  for (const auto& row : rows) {
    if (row.intent_true == "hours") {
      EXPECT_DOUBLE_EQ(row.weight, 0.0);
    } else if (row.intent_true == "refund") {
      EXPECT_NEAR(row.weight, 2.0, 1e-12);
    }
  }
}

TEST(IntentPriorTest, RefusesAPriorItCannotUse) {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, 0.9, 10, 10, "refund");
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const Status status = reweight_to_intent_prior(rows, {{"refund", 1}, {"hours", bad}});
    ASSERT_FALSE(status) << bad;
    EXPECT_EQ(status.error().code, "invalid_argument");
    EXPECT_TRUE(contains(status.error().message, "\"hours\"")) << status.error().message;
  }
  const Status uncovered = reweight_to_intent_prior(rows, {{"hours", 1}, {"refund", 0}});
  ASSERT_FALSE(uncovered);
  EXPECT_TRUE(contains(uncovered.error().message, "no in-scope row")) << uncovered.error().message;
  for (const auto& row : rows) EXPECT_DOUBLE_EQ(row.weight, 1.0);  // refused: nothing changed
}

}  // namespace
}  // namespace hengshi::router
