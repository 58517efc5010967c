// ResponseMeta: the "hengshi" object every response carries (DESIGN.md §4) — the body's
// metadata for non-streams, the final chunk's for streams — and the X-Hengshi-* headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/decision.h"

namespace hengshi {

struct ResponseMeta {
  std::string request_id;
  Decision decision;
  int level = 0;                 // degradation-chain level that answered (0 = first choice)
  std::string cache = "miss";    // miss | exact | semantic
  int attempts = 0;              // upstream/edge attempts made
  std::int64_t overhead_us = 0;  // time spent in the gateway itself, upstream time excluded
  std::string model;             // model that produced the answer
  std::string upstream;          // pool member that answered, empty for the edge
  std::optional<double> cost;    // in the configured price unit, when tokens are known
  std::string key;               // NAME of the client key that sent it (never the key); "" = auth off

  // `with_figures`: the decision's numbers (thresholds, bands) go to the log and the admin view;
  // clients see them only with server.expose_figures.
  nlohmann::json to_json(bool with_figures = true) const;
};

}  // namespace hengshi
