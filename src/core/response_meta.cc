#include "core/response_meta.h"

namespace hengshi {

nlohmann::json ResponseMeta::to_json(bool with_figures) const {
  using nlohmann::json;
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  json out = {
      {"request_id", request_id},
      {"route", decision.route},
      {"reason", decision.reason},
      {"level", level},
      {"fallback_type", or_null(decision.fallback_type)},
      {"confidence", decision.confidence ? json(*decision.confidence) : json(nullptr)},
      {"intent", or_null(decision.intent)},
      {"cache", cache},
      {"attempts", attempts},
      {"overhead_us", overhead_us},
      {"model", or_null(model)},
      {"upstream", or_null(upstream)},
      {"cost", cost ? json(*cost) : json(nullptr)},
  };
  if (!key.empty()) out["key"] = key;
  if (!decision.edge_engine.empty()) out["edge_engine"] = decision.edge_engine;
  if (with_figures && !decision.figures.empty()) out["figures"] = decision.figures;
  return out;
}

}  // namespace hengshi
