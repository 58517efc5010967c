// Decision: where a request goes and why, written once at the decision point and carried into
// the response metadata, the request log and the metrics (the operator's 3 a.m. view).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace hengshi {

struct Decision {
  std::string route;          // edge | cloud-small | cloud-large | human | refuse
  std::string reason;         // stable code: model_pinned, default_pool, pii_pin, high_confidence, ...
  std::string fallback_type;  // quality | timeout | capability; empty when not a fallback
  std::optional<double> confidence;
  std::string intent;
  std::string edge_engine;    // intent | llm, when route is edge
  nlohmann::json figures = nlohmann::json::object();  // the numbers the decision used
};

}  // namespace hengshi
