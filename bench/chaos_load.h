// The open-loop client of bench_chaos: a fixed schedule of chat requests sent to several targets
// (gateways, or the sim directly) at their due times, each on its own connection, never waiting
// for an earlier one; and what each target answered, read from the response and its "hengshi"
// metadata. One io_context thread drives it; every request is bounded by deadline + grace.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/asio.h"

namespace hengshi::bench {

using Clock = std::chrono::steady_clock;

// What kind of question: one the demo edge model answers, or one only a cloud model can.
enum class Question { faq, cloud };

struct Planned {
  Clock::duration offset;  // due time after the load starts
  Question question = Question::cloud;
  std::string text;
  bool stream = false;
};

// What one target answered to one planned request.
struct Outcome {
  bool done = false;
  int status = 0;          // 0 = no HTTP answer (connection error or client timeout)
  bool timed_out = false;  // gave up at deadline + grace
  // A well-formed answer: JSON with choices, or a stream with content that ended in [DONE] and
  // carried no error event.
  bool valid = false;
  std::int64_t latency_us = 0;             // from the due time to the end of the response
  std::optional<std::int64_t> ttft_us;     // from the due time to the first content piece
  std::optional<int> level;                // hengshi.level
  std::string kind;        // model | canned | handoff (hengshi.answer_kind, else from answered_by)
  std::string answered_by;
  std::string route;
  std::optional<double> attempts;
  bool offline = false;
  std::string first_upstream;  // the member of the first cloud attempt (hengshi.hops)
  int calls_small = 0;         // attempts at cloud-small / cloud-large (hengshi.hops)
  int calls_large = 0;
  int calls_member_open = 0;   // of which to an open member (pool in panic)
  std::optional<int> committed_after_pieces;
  std::string intent;            // hengshi.intent (the edge's prediction)
  std::string cache;             // hengshi.cache: miss | exact | semantic | stale | off
  std::optional<double> cost;    // hengshi.cost
  std::int64_t prompt_tokens = 0;      // the response's usage (a stream's usage chunk)
  std::int64_t completion_tokens = 0;
  std::string content;           // the answer's text (a stream's pieces joined)

  bool model_answer() const { return status == 200 && valid && kind == "model"; }
  bool canned_answer() const { return status == 200 && valid && (kind == "canned" || kind == "handoff"); }
};

struct Target {
  std::string name;
  int port = 0;
  std::string model = "auto";  // the request's "model" (the sim directly: a model it knows)
  std::vector<Outcome> outcomes;  // one per planned request
};

// Sends `schedule` to every target from `start` on; returns when every request has ended.
void run_load(const std::vector<Planned>& schedule, std::vector<Target*> targets, Clock::time_point start,
              std::int64_t deadline_ms, std::chrono::milliseconds give_up_after);

// The request body for a planned request.
std::string request_body(const Planned& planned, const std::string& model);

// Parses a response (for tests of the bench itself and the warm-up): fills `out` from `body`.
void read_response(const std::string& body, bool stream, Outcome& out);

// The gateway's "hengshi" object into `out`.
void read_meta(const nlohmann::json& meta, Outcome& out);

}  // namespace hengshi::bench
