// Shadow inference (issue 9 §7): for a sample of middle-band requests (and of configured task
// types), the path that did NOT answer is run in the background after the client's answer was
// written, and the two answers' agreement is logged — the raw material of the false/missed-
// fallback rates. An edge answer is shadowed by one non-streaming cloud-small call (bounded by
// chain.shadow.timeout_ms); a cloud answer by the intent engine's prediction the request already
// has (no call). The request log gets one line {"shadow": true, ...} per shadow — figures only,
// never either answer's text. Shadow cost is counted apart (hengshi_shadow_cost_total): it is in
// no ResponseMeta::cost, no key's charge and no hengshi_cost_total.
//
// Never a cloud call for a request whose plan has no cloud step (PII pinned or uncheckable,
// non-text refused, offline, a pinned edge model) nor for a key that may not use cloud-small.
//
// Ownership: ShadowRunner borrows the cloud-small pool (may be null) and the request log; both
// must outlive every shadow: call stop(), then let the io_context run out of work, before
// destroying them. Each shadow is a detached coroutine owning copies of what it needs.
// Thread-safety: offer(), stop() and in_flight() may be called from any thread. Each shadow runs
// on a strand of its own; stop() posts the cancel of its CancelToken to that strand (a token is
// single-strand), which closes the upstream socket at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>

#include "chain/attempt.h"
#include "cloud/cloud_pool.h"
#include "core/asio.h"
#include "core/chain_config.h"
#include "core/chat_request.h"
#include "core/decision.h"
#include "core/response_meta.h"
#include "edge/intent_engine.h"
#include "obs/request_log.h"

namespace hengshi::chain {

// Similarity of two texts in [0, 1]: Jaccard index of their sets of character bigrams (UTF-8
// code points, ASCII lower-cased, whitespace runs as one space, trimmed). Works the same for
// Chinese and English; two empty texts are identical (1), one empty text shares nothing (0).
double text_similarity(std::string_view a, std::string_view b);

struct ShadowAgreement {
  std::optional<bool> same_intent;  // both sides named an intent
  double similarity = 0.0;          // text_similarity of the two answers
  double agreement = 0.0;           // same_intent as 1/0 when known, else similarity
};
// An empty intent = that side names none (a cloud or edge-LLM answer).
ShadowAgreement compare_answers(std::string_view served_intent, std::string_view served_text,
                                std::string_view shadow_intent, std::string_view shadow_text);

// What to do for one delivered answer.
enum class ShadowAction {
  none,                     // not eligible or not sampled: nothing is logged or counted
  ask_cloud_small,          // an edge answer: ask cloud-small the same request
  compare_edge_prediction,  // a cloud answer: compare with the intent engine's answer
  skipped_pii,              // an edge answer whose request may not reach the cloud
  no_other_path,            // sampled, but there is nothing to compare with
};

// What the decision reads of a delivered request.
struct ShadowFacts {
  Reason reason = Reason::default_pool;
  bool plan_includes_cloud = false;  // Plan::includes_cloud()
  std::string_view task_type;
  std::string_view answered_by;          // ResponseMeta::answered_by
  bool cloud_small_usable = false;       // the pool is configured and the request's key may use it
  bool edge_prediction_answers = false;  // the intent engine ran, in scope, with an answer
};

// Eligible = middle band (middle_band / middle_band_verify) or a task type in
// config.task_types; sampled when `draw` (uniform in [0, 1)) < config.sample_rate. Pure.
ShadowAction should_shadow(const ShadowConfig& config, const ShadowFacts& facts, double draw);

// One delivered answer, as the server has it; offer() copies what it needs before returning.
struct ShadowOffer {
  const ChatRequest* request = nullptr;
  const ResponseMeta* meta = nullptr;
  const Answer* answer = nullptr;
  const edge::IntentPrediction* prediction = nullptr;  // null: the intent engine did not run
  bool cloud_small_allowed = true;                     // the request's key may use cloud-small
  std::string task_label = "none";                     // bounded task type label for the metrics
};

// Agreement at or above this is "the two paths agree" for the false / missed fallback counts:
// same intent (1) or not (0) when both name one; else the answers' text similarity.
inline constexpr double kShadowAgreeAt = 0.5;

// hengshi_shadow_* metrics, declared in one place. Outcomes: ok | error | timeout | cancelled |
// no_other_path | skipped_pii | dropped (more than max_in_flight) | no_text (a streamed answer
// whose text the gateway did not keep).
struct ShadowMetrics {
  static void count(std::string_view outcome);  // hengshi_shadow_total{outcome}
  static void add_cost(double cost);            // hengshi_shadow_cost_total
  static void observe_agreement(double value);  // hengshi_shadow_agreement (histogram, 0..1)
  // hengshi_shadow_verdicts_total{served, verdict, task_type}: served = edge | cloud (who answered
  // the client), verdict = agree | disagree. The false fallback rate is cloud/agree over cloud/*
  // (sent to the cloud though the edge would have passed); the missed fallback rate edge/disagree
  // over edge/* (the edge answered and was wrong). Both series' sums are the sample counts.
  static void count_verdict(std::string_view served, bool agree, const std::string& task_label);
};

class ShadowRunner {
 public:
  struct Options {
    std::size_t max_in_flight = 16;     // more are dropped (outcome "dropped")
    std::optional<std::uint64_t> seed;  // the sampling RNG's; none = from entropy
  };

  ShadowRunner(const ShadowConfig& config, cloud::CloudPool* cloud_small, obs::RequestLog& log)
      : ShadowRunner(config, cloud_small, log, Options{}) {}
  ShadowRunner(const ShadowConfig& config, cloud::CloudPool* cloud_small, obs::RequestLog& log,
               Options options);
  ~ShadowRunner();  // stop()
  ShadowRunner(const ShadowRunner&) = delete;
  ShadowRunner& operator=(const ShadowRunner&) = delete;

  // Call after the answer reached the client. Decides, and when a shadow is due spawns it on a
  // new strand of `executor`'s io_context; never waits, never throws.
  void offer(const asio::any_io_executor& executor, const ShadowOffer& offer);
  // New offers become no-ops; shadows in flight are cancelled (their log line says "cancelled").
  void stop();
  std::size_t in_flight() const;

  struct Shared;  // state the detached shadows share with the runner (shadow.cc)

 private:
  double draw();

  ShadowConfig config_;
  std::shared_ptr<Shared> shared_;
  std::mutex rng_mutex_;
  std::mt19937_64 rng_;
};

}  // namespace hengshi::chain
