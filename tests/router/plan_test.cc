// The plan each decision gets (router/plan.h): the degradation chain's levels, in order.
#include "router/plan.h"

#include <gtest/gtest.h>

#include "core/response_meta.h"

namespace hengshi::router {
namespace {

Decision decision_of(Route route, Reason reason, EdgeEngine engine = EdgeEngine::none) {
  Decision decision;
  decision.route = route;
  decision.reason = reason;
  decision.edge_engine = engine;
  return decision;
}

PlanInputs everything() {
  PlanInputs inputs;
  inputs.intent_answer = true;
  inputs.llm_available = true;
  inputs.pools = {"cloud-small", "cloud-large"};
  return inputs;
}

std::string steps(const Plan& plan) { return to_json(plan).dump(); }

TEST(MakePlan, EdgeIntentFallsToTheCloudsThenTheLastResort) {
  Plan plan = make_plan(decision_of(Route::edge, Reason::high_confidence, EdgeEngine::intent), everything());
  EXPECT_EQ(steps(plan), R"(["L0:edge_intent","L2:cloud-small","L3:cloud-large","L4:last_resort_reply"])");
  EXPECT_FALSE(plan.pinned);
}

TEST(MakePlan, MiddleBandVerifyServesTheEdgeAnswerOnlyOnceConfirmed) {
  Plan plan = make_plan(decision_of(Route::edge, Reason::middle_band_verify, EdgeEngine::intent), everything());
  EXPECT_EQ(steps(plan),
            R"(["L0:edge_intent_verified","L2:cloud-small","L3:cloud-large","L4:last_resort_reply"])");
}

TEST(MakePlan, EdgeLlmDegradesOnceThenTheClouds) {
  Plan plan = make_plan(decision_of(Route::edge, Reason::latency_pressure, EdgeEngine::llm), everything());
  EXPECT_EQ(steps(plan),
            R"(["L0:edge_llm","L1:edge_llm","L2:cloud-small","L3:cloud-large","L4:last_resort_reply"])");
}

TEST(MakePlan, CloudLargeFallsBackToCloudSmallBeforeTheLastResort) {
  EXPECT_EQ(steps(make_plan(decision_of(Route::cloud_large, Reason::complexity_high), everything())),
            R"(["L3:cloud-large","L2:cloud-small","L4:last_resort_reply"])");
  EXPECT_EQ(steps(make_plan(decision_of(Route::cloud_small, Reason::default_pool), everything())),
            R"(["L2:cloud-small","L3:cloud-large","L4:last_resort_reply"])");
}

TEST(MakePlan, APinnedModelIsNeverStoodInForByAnotherTarget) {
  Plan small = make_plan(decision_of(Route::cloud_small, Reason::model_pinned), everything());
  EXPECT_EQ(steps(small), R"(["L2:cloud-small"])");
  EXPECT_TRUE(small.pinned);
  Plan llm = make_plan(decision_of(Route::edge, Reason::model_pinned, EdgeEngine::llm), everything());
  EXPECT_EQ(steps(llm), R"(["L0:edge_llm","L1:edge_llm"])");
}

TEST(MakePlan, PiiPlansNeverIncludeACloudStep) {
  for (Reason reason : {Reason::pii_pin, Reason::pii_uncheckable}) {
    Plan intent = make_plan(decision_of(Route::edge, reason, EdgeEngine::intent), everything());
    EXPECT_EQ(steps(intent), R"(["L0:edge_intent","L0:edge_llm","L1:edge_llm","L4:safe_reply"])");
    EXPECT_FALSE(intent.includes_cloud());
    Plan refuse = make_plan(decision_of(Route::refuse, reason), everything());
    EXPECT_EQ(steps(refuse), R"(["L4:safe_reply"])");
  }
}

TEST(MakePlan, OfflinePlansAreEdgeOnly) {
  Plan intent = make_plan(decision_of(Route::edge, Reason::offline, EdgeEngine::intent), everything());
  EXPECT_EQ(steps(intent), R"(["L0:edge_intent","L0:edge_llm","L1:edge_llm","L4:last_resort_reply"])");
  EXPECT_FALSE(intent.includes_cloud());
  PlanInputs no_llm = everything();
  no_llm.llm_available = false;
  EXPECT_EQ(steps(make_plan(decision_of(Route::refuse, Reason::offline), no_llm)), R"(["L4:last_resort_reply"])");
}

TEST(MakePlan, MissingTargetsDropOutAndTheLastResortFollowsTheConfig) {
  PlanInputs inputs = everything();
  inputs.pools = {"cloud-small"};
  inputs.llm_available = false;
  inputs.last_resort = Source::human_handoff;
  EXPECT_EQ(steps(make_plan(decision_of(Route::edge, Reason::latency_pressure, EdgeEngine::llm), inputs)),
            R"(["L2:cloud-small","L4:human_handoff"])");
  inputs.last_resort = std::nullopt;
  EXPECT_EQ(steps(make_plan(decision_of(Route::cloud_large, Reason::complexity_high), inputs)),
            R"(["L2:cloud-small"])");
}

TEST(MakePlan, HumanRefuseAndASpentBudget) {
  EXPECT_EQ(steps(make_plan(decision_of(Route::human, Reason::sensitive_signal), everything())),
            R"(["L4:human_handoff"])");
  EXPECT_EQ(steps(make_plan(decision_of(Route::refuse, Reason::non_text_refused), everything())),
            R"(["L4:safe_reply"])");
  EXPECT_TRUE(make_plan(decision_of(Route::refuse, Reason::deadline_exceeded), everything()).steps.empty());
}

}  // namespace
}  // namespace hengshi::router
