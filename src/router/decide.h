// decide(): the router's short-circuit sequence (DESIGN.md §1), never a weighted sum. Each stage
// either decides — and the rest never run — or passes the request on:
//   1. hard constraints  PII anywhere in what would be forwarded (every message, every string
//                        and key of the body: tool calls, user, metadata, tools, prediction…)
//                        → pinned to the edge, fail closed (reason pii_pin; route refuse with the
//                        safe message when no edge engine can answer). Parts the scan cannot
//                        read (images, audio, files) → pii.non_text_parts: pin (the same, reason
//                        pii_uncheckable) or refuse (non_text_refused). Both are off when the
//                        policy disables PII detection. A sensitive signal → its configured
//                        target (sensitive_signal). No later stage can override these.
//   2. pins              a pool name as "model" (model_pinned); "edge-llm" → the edge LLM
//   3. capability        task type × length × tools × structured output → cloud when the edge
//                        cannot serve it (capability_miss; an admission, not a fallback)
//   4. deadline          a budget already spent → refuse (deadline_exceeded), never a hang
//   5. complexity        hand score (no learned model): score ≥ cloud_large_at → cloud-large
//                        (complexity_high); a session whose last `window` scores average ≥
//                        cloud_large_at stays there (session_sticky), so its answers do not flip
//                        style turn by turn. Off with a learned model (policy.complexity_model).
//   6. confidence        intent engine: out of scope → out_of_scope_route; ≥ high → edge
//                        (high_confidence); ≥ low → middle_band_route (middle_band), or with
//                        edge_verify the edge answer pending a cloud yes/no check
//                        (middle_band_verify); else
//                        low_band_route (low_confidence). No intent engine → default pool.
//                        Where out-of-scope, low band or default pool name cloud-small, a hard
//                        request (learned score ≥ its cut, or hand score ≥ cloud_large_at) goes
//                        to cloud-large instead (complexity_hard).
//   offline (after 1)   the cloud is unreachable (chain::OfflineMode): the intent engine at the
//                        offline threshold, else the edge LLM, else the last resort (reason offline)
//   7. latency gate      when the chosen cloud pool's P90 does not fit the remaining budget:
//                        an edge answer that fits (intent at ≥ low, or the LLM), or the other
//                        pool, is taken instead (latency_pressure, fallback_type timeout); when
//                        nothing fits the choice stands, marked latency_pressure.
// Every decision carries the figures it used, the policy version, and its plan (router/plan.h).
//
// Thread-safety: decide() may run concurrently; RouterRuntime synchronises itself. The policy
// is an immutable snapshot the caller holds for the whole call.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "core/budget.h"
#include "core/chat_request.h"
#include "core/decision.h"
#include "edge/intent_engine.h"
#include "router/latency_window.h"
#include "router/router_policy.h"
#include "router/session_tracker.h"

namespace hengshi::router {

struct RouteInput {
  std::string model;                       // as requested
  // Every message's text (PII scans them all). Here and in forwarded_strings, inline capacity
  // for a usual conversation and body: a route input was four allocations.
  boost::container::small_vector<std::string_view, 8> texts;
  // What else goes upstream, for the PII scan: every string value and object key of the body
  // that `texts` does not already hold (views into it), and strings built from it: each
  // message's text parts joined without a separator (a number split across parts), integers
  // below the top level written out.
  boost::container::small_vector<std::string_view, 32> forwarded_strings;
  std::vector<std::string> derived_strings;
  // Parts the scan cannot read: their kinds ("image_url", "input_audio", "file", …), each once.
  bool has_non_text_parts = false;
  std::vector<std::string> non_text_kinds;
  std::string_view last_user_text;         // what the intent engine and signals look at
  int turns = 1;                           // messages in the conversation
  std::string task_type;
  std::string session_id;
  Budget budget = Budget::after(Millis(60'000));  // the request's time (parsed once, passed down)
  int input_tokens = 0;                    // estimate over all messages
  int requested_output_tokens = 0;         // max_tokens, 0 = not set
  bool wants_structured_output = false;
  bool has_tools = false;
  const edge::IntentPrediction* prediction = nullptr;  // null: no intent engine
  bool llm_available = false;
  std::string default_pool = "cloud-small";
  std::vector<std::string> pools;          // configured pool names
  // The chain's state and settings the plan depends on.
  bool offline = false;                    // cloud unreachable: edge-only plans
  double offline_threshold = 0.5;          // the intent band while offline
  std::optional<Source> last_resort = Source::last_resort_reply;  // L4; nullopt = none
};

// Reads a ChatRequest into a RouteInput (texts and forwarded_strings point into `request`, which
// must outlive it). The body walk is iterative, linear in the body's size and bounded in depth
// (deeper than kMaxScanDepth counts as a non-text part, "nesting_too_deep": not checked, so not
// forwarded).
inline constexpr int kMaxScanDepth = 256;
RouteInput route_input(const ChatRequest& request, const Budget& budget);

// What the router learns from traffic: per-pool latency windows, the edge LLM's speed and
// per-session memory. Sized from the policy it is created with.
class RouterRuntime {
 public:
  explicit RouterRuntime(const RouterPolicy& policy);

  void observe_cloud_latency(const std::string& pool, double latency_ms,
                             std::chrono::steady_clock::time_point now);
  void observe_edge_llm(double ttft_ms, int tokens, double generation_ms);
  // The pool's P90 over the last 5 minutes, or the policy's prior before any sample.
  double cloud_p90_ms(const RouterPolicy& policy, const std::string& pool,
                      std::chrono::steady_clock::time_point now) const;
  double edge_llm_eta_ms(int tokens) const { return edge_llm_.estimate_ms(tokens); }
  SessionTracker& sessions() { return sessions_; }

 private:
  std::map<std::string, std::unique_ptr<SlidingQuantile>> cloud_latency_;  // fixed at creation
  EdgeSpeed edge_llm_;
  SessionTracker sessions_;
};

Decision decide(const RouteInput& input, const RouterPolicy& policy, RouterRuntime& runtime,
                std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

}  // namespace hengshi::router
