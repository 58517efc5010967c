// Chain: walks a decision's plan (core/decision.h) level by level within the request's Budget
// and owns every retry and fallback of the gateway (DESIGN-NOTES "The chain"):
//   - each level's deadline is its share of the remaining budget (core/budget.h);
//   - a retryable error is retried at the same level with full-jitter backoff
//     (chain.retry.backoff_ms; an upstream Retry-After is a floor), preferring another member,
//     only while the level's budget allows and only before anything reached the client;
//   - any other failure falls through to the next step; a terminal one (the request is wrong,
//     load is being shed) or the client leaving stops the walk;
//   - streams: pieces are held until the commit point (commit_gate.h) so a failed attempt is
//     replaced invisibly — by default (chain.commit.mode adaptive) only while the answering member's
//     recent streams broke midway and a later step or retry could replace it, so a healthy stream
//     costs no first-token time; an attempt with no first piece by its level's deadline is
//     abandoned (except on the last step); after the commit point the stream ends from the same
//     source.
// Every level walked and every attempt is recorded in ResponseMeta::hops and counted.
//
// Ownership: borrows the config; the request's sources must outlive execute().
// Thread-safety: execute() is re-entrant; each call runs on its request's strand.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "cache/answer_cache.h"
#include "chain/answer_source.h"
#include "chain/attempt.h"
#include "chain/backoff.h"
#include "core/budget.h"
#include "core/chain_config.h"
#include "core/response_meta.h"

namespace hengshi::chain {

// The client side of a stream (the server's response writer). Called at the commit point and
// for every piece after it; false = the client is gone.
class StreamOut {
 public:
  virtual ~StreamOut() = default;
  virtual awaitable<bool> open(const ResponseMeta& meta) = 0;
  virtual awaitable<bool> send(const Piece& piece, const ResponseMeta& meta) = 0;
};

// Which source answers for a plan step (null: not available on this gateway).
using SourceLookup = std::function<AnswerSource*(Source source)>;

struct ChainHooks {
  // A cloud attempt ended: null = it answered; else its error (offline mode counts these).
  std::function<void(const AttemptError* error)> on_cloud_outcome;
  // A cloud answer arrived: its pool and upstream latency in ms (the router's P90 windows).
  // `at`: when the attempt ended (the chain read the clock for its own record).
  std::function<void(const std::string& pool, double latency_ms, Clock::time_point at)>
      on_cloud_latency;
  // The wait before retry `retry` (0-based) at a level, or nullopt for no retry: given the
  // upstream's Retry-After and the time left in the level. Default: chain.retry with full jitter.
  std::function<std::optional<Millis>(int retry, std::optional<std::int64_t> retry_after_ms, Millis left)>
      retry_wait;
};

struct ChainResult {
  std::optional<Answer> answer;       // the answer, when a level gave one
  std::optional<AttemptError> error;  // else the final error (what the client gets)
  bool streamed = false;              // the answer's pieces went out through StreamOut
  bool committed = false;             // StreamOut was opened (headers sent)
  Clock::time_point answered_at{};    // when a level's attempt gave the answer; unset otherwise
};

// The cache as a stage of the walk: a lookup before the plan's first step, a stale entry instead of
// the canned reply at L4, a fill after a complete model answer. The server decides what this
// request may do (its PII, Cache-Control, hengshi.cache and task type settings).
struct CacheStage {
  cache::AnswerCache* cache = nullptr;
  cache::CacheQuery query;
  bool read = false;   // may be answered from the cache (fresh, or stale at L4)
  bool write = false;  // its answer may be stored
  // Confirms a borderline semantic hit (cache.verify_band): does the cached answer answer this
  // question? Null: borderline hits are misses.
  std::function<awaitable<bool>(const std::string& question, const std::string& answer, Deadline deadline,
                                CancelToken cancel)>
      verify;
};

struct ChainRequest {
  const ChatRequest* request = nullptr;
  CacheStage* cache = nullptr;  // null: the cache is not involved
  const edge::IntentPrediction* prediction = nullptr;
  CancelToken client_gone;
  // Called before the first wait on something slow (an upstream, the edge LLM, a check): the
  // server then watches the client's socket, so a client that leaves fires client_gone.
  std::function<void()> will_wait;
  StreamOut* stream = nullptr;  // null: a JSON answer
  SourceLookup sources;         // which source answers each plan step, for this request
};

class Chain {
 public:
  explicit Chain(const ChainConfig& config, ChainHooks hooks = {});

  // Walks `plan` (non-empty) within `budget`; fills `out` (a default one: the answer is built in
  // the caller's frame, not moved out of each coroutine) and meta.level / attempts / hops / model /
  // upstream / cost. Never throws for an upstream or engine failure.
  awaitable<void> execute(const Plan& plan, const Budget& budget, const ChainRequest& request,
                          ResponseMeta& meta, ChainResult& out);

 private:
  struct AttemptOutcome {
    Result<Answer, AttemptError> result;
    bool committed = false;
    bool broke_midway = false;  // a stream that failed after its first piece
    // A stream's answer as it went out (kept only when the cache may store it).
    std::string streamed_text;
    bool streamed_tool_calls = false;
    std::string streamed_finish;
  };
  // How an attempt's stream is held back (adaptive mode): `replaceable` — something could replace
  // it if it broke before its commit point; `walk_broke` — an earlier attempt of this request
  // already broke midway, so this one is held whatever its answerer's record says.
  struct HoldContext {
    bool replaceable = false;
    bool walk_broke = false;
  };
  // A streamed attempt (a buffered one is made inline in execute()): its TTFT limit, the hold
  // to the commit point, the pieces to the client. Makes the outcome in `outcome` (empty before)
  // rather than returning it: an outcome holds about a dozen strings, and each coroutine return
  // moves it twice more.
  awaitable<void> attempt_stream(AnswerSource& source, SourceRequest& source_request, PlanStep step,
                                 bool last_step, HoldContext hold_context,
                                 Deadline request_deadline, const ChainRequest& request,
                                 ResponseMeta& meta, std::optional<AttemptOutcome>& outcome);
  std::optional<Millis> retry_wait(int retry, std::optional<std::int64_t> retry_after_ms, Millis left);
  // Answers from a cache hit (fresh before the plan, stale at L4), streamed when asked.
  awaitable<void> serve_cached(const cache::CacheHit& hit, Level level, const ChainRequest& request,
                               ResponseMeta& meta, Clock::time_point started, ChainResult& out);
  // Stores a complete model answer when the request and the source allow it.
  void maybe_fill(const ChainRequest& request, PlanStep step, const Answer& answer, const AttemptOutcome& outcome,
                  const ResponseMeta& meta);

  const ChainConfig& config_;
  ChainHooks hooks_;
  std::mutex jitter_mutex_;
  Jitter jitter_ = Jitter::from_entropy();
};

}  // namespace hengshi::chain
