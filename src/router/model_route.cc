#include "router/model_route.h"

namespace hengshi::router {

Decision route_by_model(const ChatRequest& request, const Config& config) {
  Decision decision;
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
