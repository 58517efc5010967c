// ResponseMeta: the "hengshi" object every response carries (DESIGN.md §4) — the body's
// metadata for non-streams, the final chunk's for streams — and the X-Hengshi-* headers. The
// chain (src/chain/) fills level, attempts and hops as it walks the plan, so a client, the
// request log and the metrics all see the same path the request took.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/container/small_vector.hpp>
#include <nlohmann/json.hpp>

#include "core/decision.h"

namespace hengshi {

// One call to a source: which upstream member (empty for the edge), how it ended, how long.
struct AttemptRecord {
  std::string upstream;
  std::string error;  // "" = answered; else the error kind (server_error, ttft_timeout, ...)
  std::int64_t ms = 0;
  bool member_open = false;  // reached a member whose breaker is open (its pool was in panic)
};

// One level of the plan as it was walked.
struct HopRecord {
  Level level = Level::edge;
  Source source = Source::edge_intent;
  std::string outcome;  // ok | the last attempt's error kind | skipped: <why>
  std::int64_t ms = 0;
  // Inline room for the usual one attempt, and below for the usual hops: a request pushed each
  // into a vector of its own (an allocation apiece).
  boost::container::small_vector<AttemptRecord, 1> attempts;
};

struct ResponseMeta {
  std::string request_id;
  Decision decision;
  int level = 0;                 // degradation-chain level that answered (0..4)
  std::string answered_by;       // the source that answered (edge_intent, cloud-small, ...); "" = none
  std::optional<AnswerKind> answer_kind;  // model | canned | handoff; none without an answer
  // Streams: content pieces held back before the client saw the first (0 = none were held).
  std::optional<int> committed_after_pieces;
  std::string cache = "miss";    // miss | exact | semantic | stale | off (not considered)
  std::optional<double> cache_similarity;  // a cache hit's cosine (1 for exact)
  std::string cache_entry;                 // a cache hit's entry id (hex)
  int attempts = 0;              // upstream/edge attempts made, over every level
  bool offline = false;          // answered in offline mode (edge only)
  boost::container::small_vector<HopRecord, 2> hops;  // the levels walked, in order
  std::int64_t overhead_us = 0;  // time spent in the gateway itself, upstream time excluded
  std::string model;             // model that produced the answer
  // The edge LLM that answered: "<base file>" or "<base file>+<adapter>@<adapter version>".
  std::string edge_model;
  std::string upstream;          // pool member that answered, empty for the edge
  std::optional<double> cost;    // in the configured price unit, when tokens are known
  std::string key;               // NAME of the client key that sent it (never the key); "" = auth off

  // `with_figures`: the decision's numbers (thresholds, bands), the plan and the hops go to the
  // log and the admin view; clients see them only with server.expose_figures.
  nlohmann::json to_json(bool with_figures = true) const;
  // The same object as JSON text. Without figures (what every response carries) it is written
  // straight into the text: no DOM to build, sort and free on the request path.
  std::string to_json_text(bool with_figures) const;
};

nlohmann::json to_json(const Plan& plan);
nlohmann::json to_json(const HopRecord& hop);

}  // namespace hengshi
