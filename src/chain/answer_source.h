// AnswerSource: one thing that can answer a request at a level of the chain — the edge intent
// engine, the edge LLM, a cloud pool, a canned reply (and, later, the cache). A source
// *produces* an answer or a typed AttemptError; it never touches the client's socket, so the
// chain can discard a failed attempt and try the next level invisibly.
//
// Thread-safety: answer()/stream() may be called concurrently; each call runs on the request's
// strand (the CancelToken's).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chain/attempt.h"
#include "core/cancel_token.h"
#include "core/chat_request.h"
#include "core/deadline.h"
#include "core/result.h"
#include "edge/intent_engine.h"

namespace hengshi::chain {

struct SourceRequest {
  const ChatRequest* request = nullptr;
  const edge::IntentPrediction* prediction = nullptr;  // the intent engine's, when it ran
  Deadline deadline;                   // this attempt's (the level's share of the budget)
  // The attempt's: the client leaving, or a stream's TTFT limit. The chain sets it for each
  // attempt; until then it is unlinked (no state allocated for a token that is replaced).
  CancelToken cancel = CancelToken::unlinked();
  bool degraded = false;               // L1: context 70%, few-shot off, output halved
  std::vector<std::string> avoid;      // pool members that failed this request already
  // Streams: a source that picks among answerers (a pool) calls this once it has picked, before
  // the first piece, with whether that answerer's recent streams broke midway; the chain holds
  // the pieces back to the commit point only then (chain.commit.mode adaptive).
  std::function<void(bool stream_flaky)> on_answerer;
};

class AnswerSource {
 public:
  virtual ~AnswerSource() = default;
  // A complete answer.
  virtual awaitable<Result<Answer, AttemptError>> answer(const SourceRequest& request) = 0;
  // The same into `out` (a default Answer; what it holds after a failure is not used): how the
  // chain asks, so a source on the hot path builds the answer in place instead of moving it out
  // through its coroutine and the chain's (a dozen strings a move). By default, answer() moved.
  virtual awaitable<std::optional<AttemptError>> answer_into(const SourceRequest& request, Answer& out) {
    auto answered = co_await answer(request);
    if (!answered) co_return std::move(answered.error());
    out = std::move(answered).value();
    co_return std::nullopt;
  }
  // Whether stream() produces pieces; a source that does not is answered whole, also in a stream.
  virtual bool streams() const { return false; }
  // Pieces go to `sink` as they are produced (false from the sink stops the source); resolves
  // with the summary (content empty). Only called when streams() is true.
  virtual awaitable<Result<Answer, AttemptError>> stream(const SourceRequest& request, PieceSink sink) {
    (void)sink;
    co_return co_await answer(request);
  }
};

}  // namespace hengshi::chain
