// Replay: logged requests re-run offline through a candidate edge model and thresholds — the
// weekly recalibration loop, without touching production (`hengshi replay`).
//
// For each logged request with its text (log.text), the candidate predicts an intent, an answer
// and a confidence. Whether the candidate's edge answer would have *passed* needs a reference:
//   1. a label for the request (--labels: by id or by text): pass = the same intent;
//   2. else the cloud's logged answer: pass = the two answers agree (the shadow's rule);
//   3. else an edge answer of production shadowed by the cloud, with the same intent as the
//      candidate's: pass = the shadow's verdict.
// Rows without any are counted as unreferenced and left out of the rates.
//
// Per task type and per intent the report gives the confidence → pass-rate table, the false
// fallback rate (sent to the cloud though it would have passed) and the missed fallback rate
// (served at the edge and failed), each with its sample count, the lowest threshold whose
// pass rate above it reaches the target precision, and the route mix and cost the candidate would
// have produced beside what production did. Pure: the model and the thresholds come in as
// functions, so it is tested without either.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "obs/request_log_reader.h"

namespace hengshi::obs {

struct CandidateAnswer {
  std::string intent;
  std::string answer;  // the canned answer; "" = the edge has none to give
  double confidence = 0.0;
  bool out_of_scope = true;
};

struct ReplayInputs {
  std::function<CandidateAnswer(std::string_view text)> predict;
  // The band's `high` for (task type, intent): at or above it the edge answers.
  std::function<double(std::string_view task_type, std::string_view intent)> edge_threshold;
  // Whether two answers agree (the shadow's rule: chain::text_similarity >= kShadowAgreeAt).
  std::function<bool(std::string_view a, std::string_view b)> agree;
  std::map<std::string, std::string> labels_by_id;    // request id → intent
  std::map<std::string, std::string> labels_by_text;  // prompt text → intent
  // False when the candidate's answers are not known (no --model: production replayed against
  // itself): only labels and shadow verdicts can judge it then.
  bool compare_answers = true;
  double target_precision = 0.97;
  std::size_t min_intent_rows = 20;  // an intent's own threshold needs this many rows
};

struct RateWithSamples {
  std::size_t hits = 0;
  std::size_t samples = 0;
  std::optional<double> rate() const {
    return samples == 0 ? std::nullopt : std::optional<double>(static_cast<double>(hits) / samples);
  }
};

struct ConfidenceBin {
  double low = 0.0;  // [low, high)
  double high = 0.0;
  std::size_t rows = 0;
  std::size_t passed = 0;
};

struct GroupReport {
  std::vector<ConfidenceBin> bins;
  RateWithSamples false_fallback;  // candidate → cloud, would have passed
  RateWithSamples missed_fallback;  // candidate → edge, failed
  std::optional<double> chosen_threshold;  // none: no threshold reaches the target
  double chosen_share = 0.0;              // of the group's referenced rows, at that threshold
  double chosen_precision = 0.0;
  std::size_t rows = 0;                   // referenced rows
  std::size_t answering = 0;              // of those, with an edge answer: what the bins hold
};

struct RouteMix {
  std::map<std::string, std::size_t> requests;  // edge | cloud-small | cloud-large | cache | gateway | none
  double cost = 0.0;
};

struct ReplayReport {
  std::size_t requests = 0;       // logged requests read
  std::size_t with_text = 0;      // of those, with their prompt (log.text)
  std::size_t referenced = 0;     // of those, with a reference to judge the candidate by
  std::map<std::string, std::size_t> reference_kinds;  // label | cloud_answer | shadow
  GroupReport overall;
  std::map<std::string, GroupReport> task_types;
  std::map<std::string, GroupReport> intents;  // only intents with min_intent_rows rows
  RouteMix production;
  RouteMix candidate;
  double cost_all_cloud_large = 0.0;
  double cloud_cost_estimate = 0.0;  // per request, for rows production answered at the edge
};

ReplayReport replay(const std::vector<LoggedRequest>& rows, const ReplayInputs& inputs);

nlohmann::json to_json(const ReplayReport& report);
// The text tables `hengshi replay` prints.
std::string format_report(const ReplayReport& report, double target_precision);

}  // namespace hengshi::obs
