// Route by the request's "model" until the policy router (issue: router) lands: a pool name
// pins the request to that pool, anything else goes to routing.default_pool.
#pragma once

#include "core/chat_request.h"
#include "core/config.h"
#include "core/decision.h"

namespace hengshi::router {

Decision route_by_model(const ChatRequest& request, const Config& config);

}  // namespace hengshi::router
