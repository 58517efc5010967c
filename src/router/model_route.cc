#include "router/model_route.h"

namespace hengshi::router {

bool is_edge_model(const std::string& model) {
  return model == "edge" || model == "edge-intent" || model == "edge-llm";
}

Decision route_by_model(const ChatRequest& request, const Config& config, const EdgeView& edge) {
  Decision decision;
  if (request.model == "edge-llm" || (request.model == "edge" && !edge.prediction && edge.llm_available)) {
    decision.route = "edge";
    decision.edge_engine = "llm";
    decision.reason = "model_pinned";
    return decision;
  }
  if (request.model == "edge" || request.model == "edge-intent") {
    decision.route = "edge";
    decision.edge_engine = "intent";
    decision.reason = "model_pinned";
    if (!edge.prediction) return decision;  // no intent engine: the edge answers 503
    const auto& prediction = *edge.prediction;
    decision.intent = prediction.intent;
    decision.confidence = prediction.confidence;
    decision.figures = {{"margin", prediction.margin},
                        {"min_confidence", config.edge.min_confidence}};
    if (edge::answerable(prediction, config.edge.min_confidence)) {
      decision.reason = "high_confidence";
      return decision;
    }
    // The edge must learn to refuse: out of scope or unsure goes to the cloud.
    decision.route = "cloud-small";
    decision.edge_engine.clear();
    decision.reason = prediction.is_oos ? "out_of_scope" : "low_confidence";
    decision.fallback_type = "quality";
    return decision;
  }
  if (config.find_pool(request.model)) {
    decision.route = request.model;
    decision.reason = "model_pinned";
  } else {
    decision.route = config.routing.default_pool;
    decision.reason = "default_pool";
  }
  return decision;
}

}  // namespace hengshi::router
