#include "router/plan.h"

#include <algorithm>

namespace hengshi::router {
namespace {

bool has(const std::vector<std::string>& pools, std::string_view pool) {
  return std::find(pools.begin(), pools.end(), pool) != pools.end();
}

class PlanBuilder {
 public:
  explicit PlanBuilder(const PlanInputs& inputs) : inputs_(inputs) {}
  void add(Level level, Source source) {
    if (source == Source::cloud_small && !has(inputs_.pools, "cloud-small")) return;
    if (source == Source::cloud_large && !has(inputs_.pools, "cloud-large")) return;
    if (source == Source::edge_llm && !inputs_.llm_available) return;
    for (const auto& step : plan_.steps) {
      if (step.level == level && step.source == source) return;  // each step at most once
    }
    plan_.steps.push_back({level, source});
  }
  void edge_llm() {
    add(Level::edge, Source::edge_llm);
    add(Level::edge_degraded, Source::edge_llm);
  }
  void clouds(Route first) {
    if (first == Route::cloud_large) {
      add(Level::cloud_large, Source::cloud_large);
      add(Level::cloud_small, Source::cloud_small);
    } else {
      add(Level::cloud_small, Source::cloud_small);
      add(Level::cloud_large, Source::cloud_large);
    }
  }
  void last_resort() {
    if (inputs_.last_resort) add(Level::last_resort, *inputs_.last_resort);
  }
  Plan take() { return std::move(plan_); }
  Plan& plan() { return plan_; }

 private:
  const PlanInputs& inputs_;
  Plan plan_;
};

}  // namespace

Plan make_plan(const Decision& decision, const PlanInputs& inputs) {
  PlanBuilder builder(inputs);
  const Reason reason = decision.reason;
  if (reason == Reason::deadline_exceeded) return {};
  if (reason == Reason::pii_pin || reason == Reason::pii_uncheckable || reason == Reason::non_text_refused) {
    // Hard constraint: nothing leaves the edge, whatever fails.
    if (decision.route == Route::edge && decision.edge_engine == EdgeEngine::intent) {
      builder.add(Level::edge, Source::edge_intent);
    }
    if (decision.route == Route::edge) builder.edge_llm();
    builder.add(Level::last_resort, Source::safe_reply);
    return builder.take();
  }
  if (reason == Reason::offline) {
    if (decision.route == Route::edge && decision.edge_engine == EdgeEngine::intent) {
      builder.add(Level::edge, Source::edge_intent);
    }
    builder.edge_llm();
    builder.last_resort();
    return builder.take();
  }
  switch (decision.route) {
    case Route::human:
      builder.add(Level::last_resort, Source::human_handoff);
      return builder.take();
    case Route::refuse:
      builder.add(Level::last_resort, Source::safe_reply);
      return builder.take();
    case Route::edge:
      if (reason == Reason::model_pinned) {
        builder.edge_llm();
        builder.plan().pinned = true;
        return builder.take();
      }
      if (decision.edge_engine == EdgeEngine::intent) {
        builder.add(Level::edge,
                    reason == Reason::middle_band_verify ? Source::edge_intent_verified : Source::edge_intent);
      } else {
        builder.edge_llm();
      }
      builder.clouds(Route::cloud_small);
      builder.last_resort();
      return builder.take();
    case Route::cloud_small:
    case Route::cloud_large:
      if (reason == Reason::model_pinned) {
        const Source source = decision.route == Route::cloud_large ? Source::cloud_large : Source::cloud_small;
        builder.add(decision.route == Route::cloud_large ? Level::cloud_large : Level::cloud_small, source);
        builder.plan().pinned = true;
        return builder.take();
      }
      builder.clouds(decision.route);
      builder.last_resort();
      return builder.take();
  }
  return builder.take();
}

}  // namespace hengshi::router
