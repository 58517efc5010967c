#include "chain/shadow.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "chain/sources.h"
#include "core/cancel_token.h"
#include "obs/metrics.h"

namespace hengshi::chain {
namespace {

using nlohmann::json;

// UTF-8 to code points; a byte that starts no valid sequence stands for itself.
std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = lead < 0x80           ? 1
                         : (lead >> 5) == 0x6  ? 2
                         : (lead >> 4) == 0xE  ? 3
                         : (lead >> 3) == 0x1E ? 4
                                               : 0;
    bool valid = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (!valid) {
      out.push_back(0x110000 + lead);  // outside Unicode: cannot collide with a real character
      ++i;
      continue;
    }
    char32_t point = length == 1 ? lead : lead & (0x7F >> length);
    for (std::size_t k = 1; k < length; ++k) {
      point = (point << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    out.push_back(point);
    i += length;
  }
  return out;
}

bool is_space(char32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x3000; }

std::set<std::uint64_t> bigrams(std::string_view text) {
  std::vector<char32_t> points;
  for (char32_t c : code_points(text)) {
    if (is_space(c)) {
      if (!points.empty() && points.back() != ' ') points.push_back(' ');
      continue;
    }
    if (c >= U'A' && c <= U'Z') c = static_cast<char32_t>(c - U'A' + U'a');
    points.push_back(c);
  }
  if (!points.empty() && points.back() == ' ') points.pop_back();
  std::set<std::uint64_t> out;
  // A one-character text is its own "bigram" (paired with a value no character has).
  if (points.size() == 1) out.insert((static_cast<std::uint64_t>(points[0]) << 32) | 0xFFFFFFFFu);
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    out.insert((static_cast<std::uint64_t>(points[i]) << 32) | points[i + 1]);
  }
  return out;
}

// The model (edge or cloud) that answered; none for the gateway's own replies and the cache.
std::optional<Source> source_named(std::string_view name) {
  const auto source = source_from_string(name);
  if (source && (is_edge(*source) || is_cloud(*source))) return source;
  return std::nullopt;
}

std::string outcome_of(cloud::UpstreamErrorKind kind) {
  switch (kind) {
    case cloud::UpstreamErrorKind::connect_timeout:
    case cloud::UpstreamErrorKind::ttft_timeout:
    case cloud::UpstreamErrorKind::total_timeout:
      return "timeout";
    case cloud::UpstreamErrorKind::cancelled:
      return "cancelled";
    default:
      return "error";
  }
}

// What a shadow copied from its request: nothing refers back to the request's frame.
struct ShadowJob {
  std::string request_id;
  std::string reason;
  std::string answered_by;
  std::string task_label;
  std::string served_intent;  // of an edge intent answer; "" = names none
  std::string served_text;
  json body;                // the client's body, not streamed (ask_cloud_small)
  std::string edge_intent;  // the prediction's (compare_edge_prediction)
  std::string edge_answer;
};

struct ShadowResult {
  std::string outcome;
  std::string shadow_source;
  std::optional<ShadowAgreement> agreement;
  double cost = 0.0;
};

}  // namespace

struct ShadowRunner::Shared {
  Shared(cloud::CloudPool* pool, obs::RequestLog& request_log, std::int64_t timeout,
         std::size_t max)
      : cloud_small(pool), log(request_log), timeout_ms(timeout), max_in_flight(max) {}

  struct Running {
    asio::any_io_executor strand;  // where its CancelToken lives
    CancelToken cancel;
  };

  cloud::CloudPool* const cloud_small;
  obs::RequestLog& log;
  const std::int64_t timeout_ms;
  const std::size_t max_in_flight;

  mutable std::mutex mutex;
  bool stopped = false;                      // guarded by mutex
  std::uint64_t next_id = 0;                 // guarded by mutex
  std::map<std::uint64_t, Running> running;  // guarded by mutex

  void record(const ShadowJob& job, const ShadowResult& result, std::int64_t ms) {
    ShadowMetrics::count(result.outcome);
    if (result.cost > 0) ShadowMetrics::add_cost(result.cost);
    const auto served = source_named(job.answered_by);
    const char* served_by = served && is_edge(*served) ? "edge" : "cloud";
    const bool agree = result.agreement && result.agreement->agreement >= kShadowAgreeAt;
    if (result.agreement) {
      ShadowMetrics::observe_agreement(result.agreement->agreement);
      ShadowMetrics::count_verdict(served_by, agree, job.task_label);
    }
    if (!log.enabled()) return;
    json line = {
        {"shadow", true},
        {"id", job.request_id},
        {"reason", job.reason},
        {"answered_by", job.answered_by},
        {"served", served_by},
        {"verdict", result.agreement ? json(agree ? "agree" : "disagree") : json(nullptr)},
        {"shadow_source",
         result.shadow_source.empty() ? json(nullptr) : json(result.shadow_source)},
        {"agreement", result.agreement ? json(result.agreement->agreement) : json(nullptr)},
        {"similarity", result.agreement ? json(result.agreement->similarity) : json(nullptr)},
        {"same_intent", result.agreement && result.agreement->same_intent
                            ? json(*result.agreement->same_intent)
                            : json(nullptr)},
        {"shadow_cost", result.cost},
        {"ms", ms},
        {"outcome", result.outcome}};
    log.write(std::move(line));
  }
};

namespace {

// A free function, not a lambda: the coroutine frame owns its parameters (a lambda coroutine's
// captures die with the lambda object).
awaitable<void> run_shadow(std::shared_ptr<ShadowRunner::Shared> shared, ShadowAction action,
                           ShadowJob job, CancelToken cancel) {
  const auto started = Clock::now();
  ShadowResult result;
  if (action == ShadowAction::compare_edge_prediction) {
    result.shadow_source = std::string(to_string(Source::edge_intent));
    result.outcome = "ok";
    result.agreement =
        compare_answers(job.served_intent, job.served_text, job.edge_intent, job.edge_answer);
  } else {
    result.shadow_source = shared->cloud_small->name();
    const Deadline deadline = Deadline::after(Millis(shared->timeout_ms));
    auto reply = co_await shared->cloud_small->complete(job.body, deadline, cancel);
    if (reply) {
      result.outcome = "ok";
      result.cost = cost_of(*shared->cloud_small, reply->upstream, reply->usage.prompt_tokens,
                            reply->usage.completion_tokens);
      result.agreement =
          compare_answers(job.served_intent, job.served_text, "", reply_text(reply->body));
    } else {
      result.outcome = cancel.cancelled() ? "cancelled" : outcome_of(reply.error().kind);
    }
  }
  shared->record(
      job, result,
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
}

}  // namespace

// ---- pure parts ----

double text_similarity(std::string_view a, std::string_view b) {
  const auto left = bigrams(a);
  const auto right = bigrams(b);
  if (left.empty() && right.empty()) return 1.0;
  std::size_t common = 0;
  for (std::uint64_t gram : left) common += right.count(gram);
  const std::size_t all = left.size() + right.size() - common;
  return static_cast<double>(common) / static_cast<double>(all);
}

ShadowAgreement compare_answers(std::string_view served_intent, std::string_view served_text,
                                std::string_view shadow_intent, std::string_view shadow_text) {
  ShadowAgreement out;
  out.similarity = text_similarity(served_text, shadow_text);
  if (!served_intent.empty() && !shadow_intent.empty()) {
    out.same_intent = served_intent == shadow_intent;
    out.agreement = *out.same_intent ? 1.0 : 0.0;
  } else {
    out.agreement = out.similarity;
  }
  return out;
}

ShadowAction should_shadow(const ShadowConfig& config, const ShadowFacts& facts, double draw) {
  const bool middle_band =
      facts.reason == Reason::middle_band || facts.reason == Reason::middle_band_verify;
  const bool listed =
      !facts.task_type.empty() && std::find(config.task_types.begin(), config.task_types.end(),
                                            facts.task_type) != config.task_types.end();
  if (!middle_band && !listed) return ShadowAction::none;
  if (!(draw < config.sample_rate)) return ShadowAction::none;
  const auto answered_by = source_named(facts.answered_by);
  if (!answered_by) return ShadowAction::none;  // a canned reply: nothing worth comparing
  if (is_edge(*answered_by)) {
    // The other path is the cloud: never for what the router kept off it.
    if (is_pii_reason(facts.reason)) return ShadowAction::skipped_pii;
    if (!facts.plan_includes_cloud || !facts.cloud_small_usable) return ShadowAction::no_other_path;
    return ShadowAction::ask_cloud_small;
  }
  return facts.edge_prediction_answers ? ShadowAction::compare_edge_prediction
                                       : ShadowAction::no_other_path;
}

// ---- metrics ----

void ShadowMetrics::count(std::string_view outcome) {
  obs::Registry::global()
      .counter("hengshi_shadow_total",
               "Shadow inferences (the other path, run after the answer), by outcome",
               {{"outcome", std::string(outcome)}})
      .inc();
}

void ShadowMetrics::add_cost(double cost) {
  obs::Registry::global()
      .counter("hengshi_shadow_cost_total",
               "Cost of shadow calls, in the configured price unit (not billed)")
      .inc(cost);
}

void ShadowMetrics::count_verdict(std::string_view served, bool agree, const std::string& task_label) {
  obs::Registry::global()
      .counter("hengshi_shadow_verdicts_total",
               "Shadowed answers by who served them (edge | cloud) and whether the other path agreed "
               "(false fallback: cloud/agree; missed fallback: edge/disagree)",
               {{"served", std::string(served)}, {"verdict", agree ? "agree" : "disagree"}, {"task_type", task_label}})
      .inc();
}

void ShadowMetrics::observe_agreement(double value) {
  static const std::vector<double> buckets = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
  obs::Registry::global()
      .histogram("hengshi_shadow_agreement",
                 "Agreement of an answer with its shadow (1 = same intent / text)", {}, buckets)
      .observe(value);
}

// ---- runner ----

ShadowRunner::ShadowRunner(const ShadowConfig& config, cloud::CloudPool* cloud_small,
                           obs::RequestLog& log, Options options)
    : config_(config),
      shared_(std::make_shared<Shared>(cloud_small, log, config.timeout_ms, options.max_in_flight)),
      rng_(options.seed ? *options.seed : std::random_device{}()) {}

ShadowRunner::~ShadowRunner() { stop(); }

double ShadowRunner::draw() {
  std::lock_guard lock(rng_mutex_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

std::size_t ShadowRunner::in_flight() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->running.size();
}

void ShadowRunner::stop() {
  std::lock_guard lock(shared_->mutex);
  shared_->stopped = true;
  for (auto& [id, running] : shared_->running) {
    asio::post(running.strand, [cancel = running.cancel]() mutable { cancel.cancel(); });
  }
}

void ShadowRunner::offer(const asio::any_io_executor& executor, const ShadowOffer& offer) {
  if (config_.sample_rate <= 0.0 || offer.request == nullptr || offer.meta == nullptr ||
      offer.answer == nullptr) {
    return;
  }
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopped) return;
  }
  const ChatRequest& request = *offer.request;
  const ResponseMeta& meta = *offer.meta;
  const Answer& answer = *offer.answer;
  const edge::IntentPrediction* prediction = offer.prediction;
  ShadowFacts facts;
  facts.reason = meta.decision.reason;
  facts.plan_includes_cloud = meta.decision.plan.includes_cloud();
  facts.task_type = request.hengshi.task_type;
  facts.answered_by = meta.answered_by;
  facts.cloud_small_usable = shared_->cloud_small != nullptr && offer.cloud_small_allowed;
  facts.edge_prediction_answers =
      prediction != nullptr && !prediction->is_oos && !prediction->answer.empty();
  const ShadowAction action = should_shadow(config_, facts, draw());
  if (action == ShadowAction::none) return;

  ShadowJob job;
  job.request_id = meta.request_id;
  job.reason = std::string(to_string(meta.decision.reason));
  job.answered_by = meta.answered_by;
  job.task_label = offer.task_label;
  job.served_text = answer.content.empty() ? reply_text(answer.upstream_body) : answer.content;
  const auto served = source_named(meta.answered_by);
  if (served == Source::edge_intent || served == Source::edge_intent_verified)
    job.served_intent = meta.decision.intent;

  ShadowResult immediate;
  if (action == ShadowAction::skipped_pii) immediate.outcome = "skipped_pii";
  if (action == ShadowAction::no_other_path) immediate.outcome = "no_other_path";
  // A streamed answer's pieces went straight to the client: there is no text to compare.
  if (immediate.outcome.empty() && job.served_text.empty()) immediate.outcome = "no_text";
  if (!immediate.outcome.empty()) {
    shared_->record(job, immediate, 0);
    return;
  }
  if (action == ShadowAction::compare_edge_prediction) {
    job.edge_intent = prediction->intent;
    job.edge_answer = prediction->answer;
  } else {
    job.body = request.body();
    job.body["stream"] = false;
    job.body.erase("stream_options");
  }

  // The io_context's own executor when the caller runs on a strand, so the shadow gets a strand
  // of its own instead of queueing behind the connection.
  asio::any_io_executor base = executor;
  if (const auto* strand = executor.target<asio::strand<asio::io_context::executor_type>>()) {
    base = strand->get_inner_executor();
  }
  asio::any_io_executor strand = asio::make_strand(base);
  CancelToken cancel;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopped) return;
    if (shared_->running.size() >= shared_->max_in_flight) {
      immediate.outcome = "dropped";
    } else {
      id = ++shared_->next_id;
      shared_->running.emplace(id, Shared::Running{strand, cancel});
    }
  }
  if (!immediate.outcome.empty()) {
    shared_->record(job, immediate, 0);
    return;
  }
  asio::co_spawn(strand, run_shadow(shared_, action, std::move(job), std::move(cancel)),
                 [shared = shared_, id](const std::exception_ptr&) {
                   // Whatever happened (an exception is impossible by contract), it is no longer
                   // running.
                   std::lock_guard lock(shared->mutex);
                   shared->running.erase(id);
                 });
}

}  // namespace hengshi::chain
