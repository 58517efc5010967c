// Reading the request log back (schema 1, docs/request-log.md): what `hengshi replay` and
// `hengshi flywheel export` start from. One LoggedRequest per request line; a shadow line
// ({"shadow": true}) is joined to its request by id. Lines of another schema, malformed lines and
// lines that are not objects are counted and skipped, never fatal: a log is read as it is.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace hengshi::obs {

struct LoggedRequest {
  std::string id;
  std::string task_type;    // "" when the request named none
  std::string session;      // "" when none (redacted as logged)
  std::string route;        // the decision's route
  std::string reason;
  std::string answered_by;  // edge_intent, cloud-small, cache, ... ; "" = no answer
  std::string answer_kind;  // model | canned | handoff | stale ; "" = no answer
  std::string intent;       // the production intent prediction, "" = none
  std::optional<double> confidence;  // the production confidence
  int status = 0;
  double cost = 0.0;
  double cost_all_cloud_large = 0.0;
  std::optional<std::string> prompt;  // log.text: the last user turn
  std::optional<std::string> answer;  // log.text: the answer (null for streams)
  std::optional<bool> shadow_agree;   // the shadow's verdict, when one ran for this request
  bool pii = false;                   // the router saw PII (never any text then)

  bool edge_served() const;   // answered by an edge source
  bool cloud_served() const;  // answered by cloud-small or cloud-large
};

struct LogReadStats {
  std::size_t lines = 0;
  std::size_t requests = 0;
  std::size_t shadows = 0;
  std::size_t malformed = 0;     // not JSON, or not an object
  std::size_t other_schema = 0;  // schema missing or not 1
};

// Reads every line of `in`, appending requests to `out` in log order.
void read_request_log(std::istream& in, std::vector<LoggedRequest>& out, LogReadStats& stats);

// The same over several files (a log and its rotated parts) as one log: a shadow line joins its
// request whichever file each landed in. Error "log_unreadable" names a file that cannot be opened.
Status read_request_log_files(const std::vector<std::string>& paths, std::vector<LoggedRequest>& out,
                              LogReadStats& stats);

}  // namespace hengshi::obs
