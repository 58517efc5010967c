// Route by the request's "model" until the policy router (issue: router) lands:
//   edge-llm                → the edge LLM
//   edge | edge-intent      → the intent engine when its calibrated confidence reaches
//                             edge.min_confidence; out-of-scope or low confidence → cloud-small
//                             (fallback_type quality); "edge" without an intent engine → the LLM
//   a pool name             → that pool (model_pinned); anything else → routing.default_pool
#pragma once

#include "core/chat_request.h"
#include "core/config.h"
#include "core/decision.h"
#include "edge/intent_engine.h"

namespace hengshi::router {

// What the edge can offer this request. `prediction` is the intent engine's answer for the last
// user message, null when there is no intent engine.
struct EdgeView {
  const edge::IntentPrediction* prediction = nullptr;
  bool llm_available = false;
};

bool is_edge_model(const std::string& model);

Decision route_by_model(const ChatRequest& request, const Config& config, const EdgeView& edge);

}  // namespace hengshi::router
