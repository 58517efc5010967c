#include "chain/chain.h"

#include <spdlog/spdlog.h>

#include "chain/backoff.h"
#include "chain/chain_metrics.h"
#include "chain/commit_gate.h"

namespace hengshi::chain {

using namespace std::string_view_literals;

namespace {

using std::chrono::duration_cast;

std::int64_t ms_between(Clock::time_point start, Clock::time_point end) {
  return duration_cast<std::chrono::milliseconds>(end - start).count();
}

AttemptError deadline_error() {
  AttemptError error;
  error.kind = "deadline_exceeded";
  error.error_class = ErrorClass::next_level;
  error.api = ApiError::gateway_timeout("deadline_exceeded",
                                        "no level of the chain answered within the request's deadline "
                                        "(hengshi.deadline_ms / X-Hengshi-Deadline-Ms)");
  return error;
}

AttemptError unavailable_error(Source source) {
  AttemptError error;
  error.kind = "unavailable";
  error.api = ApiError::unavailable("route_unavailable",
                                    "no configured target could answer (" + std::string(to_string(source)) + ")");
  return error;
}

// What one attempt shares with its TTFT timer's handler, which may run after the attempt ended.
struct AttemptState {
  CancelToken token;
  bool first_piece = false;
  bool ttft_fired = false;
};

// `ended`: when the hop's last attempt returned, read once for the attempt and the hop alike.
void record_hop(ResponseMeta& meta, HopRecord hop, Clock::time_point started,
                Clock::time_point ended = Clock::now()) {
  hop.ms = ms_between(started, ended);
  ChainMetrics::count_hop(to_string(hop.level), to_string(hop.source), hop.outcome);
  meta.hops.push_back(std::move(hop));
}

}  // namespace

Chain::Chain(const ChainConfig& config, ChainHooks hooks) : config_(config), hooks_(std::move(hooks)) {}

std::optional<Millis> Chain::retry_wait(int retry, std::optional<std::int64_t> retry_after_ms, Millis left) {
  if (hooks_.retry_wait) return hooks_.retry_wait(retry, retry_after_ms, left);
  std::lock_guard lock(jitter_mutex_);
  auto wait = next_retry_wait_ms(config_.retry, retry, retry_after_ms, left.count(), jitter_);
  if (!wait) return std::nullopt;
  return Millis(*wait);
}

awaitable<void> Chain::execute(const Plan& plan, const Budget& budget, const ChainRequest& request,
                               ResponseMeta& meta, ChainResult& out) {
  std::optional<AttemptError> last_error;
  double billed = 0.0;  // what failed attempts cost (a rejected verification is still paid for)
  bool walk_broke = false;  // a stream of this request broke midway: the replacements are held
  if (request.cache != nullptr && request.cache->read && !plan.steps.empty() && !budget.spent()) {
    const auto started = Clock::now();
    std::optional<cache::CacheHit> hit = co_await request.cache->cache->lookup(request.cache->query);
    if (hit && hit->borderline) {
      // Close but under the threshold: served only when a cheap cloud check agrees.
      bool confirmed = false;
      if (request.cache->verify) {
        if (request.will_wait) request.will_wait();
        const Deadline check_deadline = budget.for_level(Level::cloud_small, false);
        confirmed = co_await request.cache->verify(request.request->last_user_text(), hit->entry->answer.content,
                                                   check_deadline, request.client_gone);
      }
      request.cache->cache->verified(confirmed ? "yes" : "no");
      meta.decision.figures["cache_verify"] = confirmed ? "yes" : "no";
      if (!confirmed) hit.reset();
    }
    if (hit) {
      co_await serve_cached(*hit, plan.steps.front().level, request, meta, started, out);
      co_return;
    }
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep step = plan.steps[i];
    bool last_before_resort = true;
    for (std::size_t j = i + 1; j < plan.steps.size(); ++j) {
      if (plan.steps[j].level != Level::last_resort) last_before_resort = false;
    }
    const bool last_step = i + 1 == plan.steps.size();
    const auto hop_started = Clock::now();
    HopRecord hop{step.level, step.source, "", 0, {}};
    AnswerSource* source = request.sources ? request.sources(step.source) : nullptr;
    if (source == nullptr) {
      hop.outcome = "skipped_unavailable";
      if (!last_error) last_error = unavailable_error(step.source);
      record_hop(meta, std::move(hop), hop_started);
      continue;
    }
    // Nothing starts on a spent budget, the last resort included: its time is the reserve the
    // levels before it leave (chain.shares.last_resort_ms), so no answer outlives the deadline.
    // One clock reading for the hop's start, its budget checks and its first attempt: each
    // reading is a vDSO call, and a request made two dozen of them.
    if (budget.spent(hop_started)) {
      hop.outcome = "skipped_budget_spent";
      last_error = deadline_error();
      record_hop(meta, std::move(hop), hop_started);
      continue;
    }
    if (step.level == Level::last_resort && request.cache != nullptr && request.cache->read) {
      // Everything before failed: an expired answer to the same question beats the canned reply.
      if (auto stale = request.cache->cache->stale(request.cache->query)) {
        co_await serve_cached(*stale, step.level, request, meta, hop_started, out);
        co_return;
      }
    }
    const Deadline level_deadline = budget.for_level(step.level, last_before_resort, hop_started);
    SourceRequest source_request;
    source_request.request = request.request;
    source_request.prediction = request.prediction;
    source_request.deadline = level_deadline;
    source_request.degraded = step.level == Level::edge_degraded;

    // Anything but the intent engine's or a canned answer waits: the client is watched from here.
    const bool waits = step.source != Source::edge_intent && answer_kind(step.source) == AnswerKind::model;
    if (waits && request.will_wait) request.will_wait();
    for (int retry = 0;; ++retry) {
      const auto attempt_started = retry == 0 ? hop_started : Clock::now();
      if (retry > 0) ChainMetrics::count_retry(to_string(step.source));
      // Could anything replace this attempt's stream if it broke before the commit point: a later
      // step of the plan, or a retry at this level?
      HoldContext hold;
      hold.replaceable = !last_step || (is_cloud(step.source) && config_.retry.enabled &&
                                        retry < static_cast<int>(config_.retry.backoff_ms.size()));
      hold.walk_broke = walk_broke;
      std::optional<AttemptOutcome> attempted;
      if (request.stream == nullptr || !source->streams()) {
        // A buffered attempt, here rather than in a coroutine of its own (a frame and a pass
        // through Asio's machinery per request). Only the client leaving cancels it, so it waits
        // on the client's token itself: a token of its own cost an allocation and a registration.
        source_request.cancel = request.client_gone;
        // The source builds its answer in the outcome's own slot.
        attempted.emplace(std::in_place_type<Answer>, false);
        if (auto failed = co_await source->answer_into(source_request, *attempted->result)) {
          attempted->result = std::move(*failed);
        }
      } else {
        co_await attempt_stream(*source, source_request, step, last_step, hold, budget.deadline(),
                                request, meta, attempted);
      }
      AttemptOutcome& outcome = *attempted;
      const auto attempt_ended =
          outcome.result && outcome.result->finished_at != Clock::time_point{}
              ? outcome.result->finished_at
              : Clock::now();
      walk_broke = walk_broke || outcome.broke_midway;
      if (!outcome.result && outcome.result.error().kind == "circuit_open"sv) {
        // Every member's breaker is open: the pool refused without a call. Not an attempt; the
        // level is skipped at once (no retry: the breakers stay open longer than any backoff).
        last_error = outcome.result.error();
        break;
      }
      meta.attempts += 1;
      AttemptRecord record;
      record.ms = ms_between(attempt_started, attempt_ended);
      if (!outcome.result) record.member_open = outcome.result.error().member_open;
      if (outcome.result) {
        Answer& answer = *outcome.result;
        record.upstream = answer.upstream;
        hop.attempts.push_back(std::move(record));
        hop.outcome = "ok";
        ChainMetrics::count_attempt(to_string(step.source), "ok");
        record_hop(meta, std::move(hop), hop_started, attempt_ended);
        if (is_cloud(step.source)) {
          if (hooks_.on_cloud_outcome) hooks_.on_cloud_outcome(nullptr);
          // Upstream time only: for a stream its first piece (held, so no client write is in it).
          const auto upstream_time = outcome.committed ? answer.ttft : answer.source_time;
          if (hooks_.on_cloud_latency) {
            hooks_.on_cloud_latency(
                answer.pool, static_cast<double>(upstream_time.count()) / 1000.0, attempt_ended);
          }
        }
        answer.cost += billed;
        meta.level = static_cast<int>(step.level);
        meta.answered_by = std::string(to_string(step.source));
        meta.answer_kind = answer_kind(step.source);
        meta.model = answer.model;
        meta.edge_model = answer.edge_model;
        meta.upstream = answer.upstream;
        meta.cost = answer.cost;
        ChainMetrics::count_answer(to_string(step.level), to_string(*meta.answer_kind));
        maybe_fill(request, step, answer, outcome, meta);
        out.answer = std::move(answer);
        out.answered_at = attempt_ended;
        out.streamed = outcome.committed;
        out.committed = outcome.committed;
        co_return;
      }

      AttemptError error = std::move(outcome.result.error());
      record.upstream = error.upstream;
      record.error = error.kind;
      hop.attempts.push_back(std::move(record));
      ChainMetrics::count_attempt(to_string(step.source), error.kind);
      billed += error.cost;
      if (is_cloud(step.source) && hooks_.on_cloud_outcome && error.error_class != ErrorClass::cancelled) {
        hooks_.on_cloud_outcome(&error);
      }
      const bool stop = outcome.committed || error.error_class == ErrorClass::cancelled ||
                        error.error_class == ErrorClass::terminal;
      if (stop) {
        error.after_first_byte = outcome.committed;
        hop.outcome = error.kind;
        record_hop(meta, std::move(hop), hop_started, attempt_ended);
        if (billed > 0.0) meta.cost = billed;
        ChainMetrics::count_answer("none", "error");
        out.committed = outcome.committed;
        out.error = std::move(error);
        co_return;
      }
      last_error = error;
      if (error.error_class == ErrorClass::retryable && is_cloud(step.source) && config_.retry.enabled &&
          !request.client_gone.cancelled()) {
        const auto wait = retry_wait(retry, error.retry_after_ms, level_deadline.remaining());
        if (wait) {
          // The next attempt prefers another member of the pool.
          if (!error.upstream.empty()) source_request.avoid.push_back(error.upstream);
          boost::system::error_code ec;
          asio::steady_timer timer(co_await asio::this_coro::executor);
          timer.expires_after(*wait);
          CancelToken client_gone = request.client_gone;  // a handle on the same shared state
          auto registration = client_gone.on_cancel([&timer] { timer.cancel(); });
          co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
          if (!request.client_gone.cancelled()) continue;
        }
      }
      break;
    }
    if (request.client_gone.cancelled()) {
      AttemptError gone;
      gone.kind = "cancelled";
      gone.error_class = ErrorClass::cancelled;
      hop.outcome = "cancelled";
      record_hop(meta, std::move(hop), hop_started);
      out.error = std::move(gone);
      co_return;
    }
    hop.outcome = last_error ? last_error->kind : "failed";
    if (hop.attempts.empty() && last_error && last_error->kind == "circuit_open"sv)
      hop.outcome = "skipped_circuit_open";
    record_hop(meta, std::move(hop), hop_started);
  }
  if (billed > 0.0) meta.cost = billed;
  ChainMetrics::count_answer("none", "error");
  out.error = last_error ? std::move(*last_error) : deadline_error();
  co_return;
}

awaitable<void> Chain::attempt_stream(AnswerSource& source, SourceRequest& source_request,
                                      PlanStep step, bool last_step, HoldContext hold_context,
                                      Deadline request_deadline, const ChainRequest& request,
                                      ResponseMeta& meta, std::optional<AttemptOutcome>& outcome) {
  CancelToken client_gone = request.client_gone;  // a handle on the same shared state
  // Shared with the TTFT timer's handler, which may run after the attempt ended.
  auto state = std::make_shared<AttemptState>();
  source_request.cancel = state->token;
  // The client leaving cancels the attempt (the attempt's own token also serves the TTFT limit).
  // A plain pointer (no allocation for the callback): the registration ends with this coroutine,
  // before `state` can go.
  auto client_registration =
      client_gone.on_cancel([attempt = state.get()] { attempt->token.cancel(); });

  // A stream: the attempt may run to the request's deadline once it has started answering, but
  // must show its first piece by the level's deadline — except on the last step, where waiting
  // longer beats giving up.
  SourceRequest stream_request = source_request;
  stream_request.deadline = request_deadline;
  asio::steady_timer ttft_timer(co_await asio::this_coro::executor);
  if (!last_step) {
    ttft_timer.expires_at(source_request.deadline.at());
    ttft_timer.async_wait([state](const boost::system::error_code& ec) {
      if (ec || state->first_piece) return;
      state->ttft_fired = true;
      state->token.cancel();
    });
  }

  // Whether this stream's pieces are held back to the commit point: always / never, or (adaptive)
  // only when something could replace this one and either this request already lost a stream or
  // the answerer's recent streams broke midway. A source that names no answerer (the edge LLM)
  // counts as healthy.
  const CommitMode mode = request.request != nullptr && request.request->hengshi.commit
                              ? *request.request->hengshi.commit
                              : config_.commit.mode_for(request.request ? request.request->hengshi.task_type : "");
  bool hold = config_.commit.tokens > 0 &&
              (mode == CommitMode::always ||
               (mode == CommitMode::adaptive && hold_context.replaceable && hold_context.walk_broke));
  if (mode == CommitMode::adaptive && config_.commit.tokens > 0 && hold_context.replaceable) {
    stream_request.on_answerer = [&hold](bool stream_flaky) { hold = hold || stream_flaky; };
  }
  CommitGate gate(config_.commit);
  std::vector<std::pair<Piece::Kind, std::string>> held;
  bool committed = false;
  bool client_ok = true;
  StreamOut& client = *request.stream;
  // Opens the client's stream and sends what was held; from here on this source owns the answer.
  auto commit = [&]() -> awaitable<bool> {
    committed = true;
    meta.level = static_cast<int>(step.level);
    meta.answered_by = std::string(to_string(step.source));
    meta.committed_after_pieces = hold ? static_cast<int>(held.size()) : 0;
    if (!co_await client.open(meta)) co_return client_ok = false;
    for (const auto& [kind, data] : held) {
      Piece piece{kind, data};
      if (!co_await client.send(piece, meta)) co_return client_ok = false;
    }
    held.clear();
    co_return true;
  };
  // The answer as it goes out, kept only when the cache may store it.
  const bool keep_text = request.cache != nullptr && request.cache->write;
  std::string streamed_text;
  bool streamed_tool_calls = false;
  std::string streamed_finish;
  PieceSink sink = [&](const Piece& piece) -> awaitable<bool> {
    state->first_piece = true;
    if (keep_text) {
      if (piece.kind == Piece::Kind::text) {
        streamed_text.append(piece.data);
      } else {
        ChunkDelta delta = chunk_delta(piece.data);
        streamed_text += delta.content;
        streamed_tool_calls = streamed_tool_calls || delta.tool_calls;
        if (!delta.finish_reason.empty()) streamed_finish = delta.finish_reason;
      }
    }
    if (committed) {
      client_ok = co_await client.send(piece, meta);
      co_return client_ok;
    }
    held.emplace_back(piece.kind, std::string(piece.data));
    if (hold) {
      const std::string text =
          piece.kind == Piece::Kind::text ? std::string(piece.data) : chunk_content(piece.data);
      if (!gate.add_text(text)) co_return true;
    }
    co_return co_await commit();
  };

  auto result = co_await source.stream(stream_request, sink);
  ttft_timer.cancel();
  if (result && !committed) {
    // The whole answer arrived before the commit point (a short one): it goes out now.
    co_await commit();
  }
  if (!client_ok) {
    AttemptError gone;
    gone.kind = "cancelled";
    gone.error_class = ErrorClass::cancelled;
    outcome.emplace(std::move(gone), committed);
    co_return;
  }
  if (!result) {
    AttemptError error = result.error();
    if (state->ttft_fired && !request.client_gone.cancelled() && !committed) {
      // Our own limit, not the client: the next level starts.
      error.kind = "ttft_timeout";
      error.error_class = ErrorClass::next_level;
      error.cloud_unreachable = true;  // a timeout: counts towards offline mode for a cloud source
      error.upstream_kind = cloud::UpstreamErrorKind::ttft_timeout;
      error.api = ApiError::gateway_timeout("ttft_timeout", "no first token within the level's share of the budget");
    }
    ChainMetrics::count_stream_failure(committed ? "after_commit" : "before_commit");
    outcome.emplace(std::move(error), committed, state->first_piece);
    co_return;
  }
  outcome.emplace(std::move(result), committed, false, std::move(streamed_text), streamed_tool_calls,
                  std::move(streamed_finish));
}

// ---- the cache stage ----

namespace {

// Up to `max_bytes` of `text`, cut on a UTF-8 character boundary.
std::size_t utf8_cut(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut == 0 ? max_bytes : cut;
}

}  // namespace

awaitable<void> Chain::serve_cached(const cache::CacheHit& hit, Level level, const ChainRequest& request,
                                    ResponseMeta& meta, Clock::time_point started, ChainResult& out) {
  const cache::CacheEntry& entry = *hit.entry;
  const bool stale = hit.tier == cache::CacheTier::stale;
  Answer answer;
  answer.model = entry.answer.model;
  answer.finish_reason = entry.answer.finish_reason;
  answer.usage = {entry.answer.prompt_tokens, entry.answer.completion_tokens};
  answer.pool = "cache";
  answer.figures["cache_source"] = entry.answer.source;
  if (!entry.answer.model_version.empty()) answer.figures["cache_model_version"] = entry.answer.model_version;
  if (hit.from_shared_tier) answer.figures["cache_tier"] = "redis";
  meta.cache = cache::to_string(hit.tier);
  meta.cache_similarity = hit.similarity;
  meta.cache_entry = cache::to_hex(entry.id);
  meta.level = static_cast<int>(level);
  meta.answered_by = std::string(to_string(Source::cache));
  meta.answer_kind = stale ? AnswerKind::stale : AnswerKind::model;
  meta.model = entry.answer.model;
  meta.cost = 0.0;
  HopRecord hop{level, Source::cache, stale ? "stale" : "ok", 0, {}};
  record_hop(meta, std::move(hop), started);
  ChainMetrics::count_answer(stale ? to_string(level) : "cache", to_string(*meta.answer_kind));
  if (request.stream == nullptr) {
    answer.content = entry.answer.content;
    out.answer = std::move(answer);
    co_return;
  }
  // A stream: the cached text replayed as pieces, as a model would have sent them.
  StreamOut& client = *request.stream;
  meta.committed_after_pieces = 0;
  bool client_ok = co_await client.open(meta);
  std::string_view rest = entry.answer.content;
  while (client_ok && !rest.empty()) {
    const std::size_t cut = utf8_cut(rest, 24);
    const std::string text(rest.substr(0, cut));
    Piece piece{Piece::Kind::text, text};
    client_ok = co_await client.send(piece, meta);
    rest.remove_prefix(cut);
  }
  out.committed = true;
  if (!client_ok) {
    AttemptError gone;
    gone.kind = "cancelled";
    gone.error_class = ErrorClass::cancelled;
    out.error = std::move(gone);
    co_return;
  }
  out.streamed = true;
  out.answer = std::move(answer);
  co_return;
}

void Chain::maybe_fill(const ChainRequest& request, PlanStep step, const Answer& answer, const AttemptOutcome& outcome,
                       const ResponseMeta& meta) {
  if (request.cache == nullptr || !request.cache->write || meta.offline) return;
  // Only complete model answers: a cloud pool's, or the edge's above its band.
  const bool from_cloud = is_cloud(step.source);
  const bool confident_edge = step.source == Source::edge_intent && meta.decision.reason == Reason::high_confidence;
  if (!from_cloud && !confident_edge) return;
  cache::CachedAnswer cached;
  cached.model = answer.model;
  cached.prompt_tokens = answer.usage.prompt;
  cached.completion_tokens = answer.usage.completion;
  cached.source = answer.pool.empty() ? std::string(to_string(step.source)) : answer.pool;
  cached.model_version = answer.model;
  if (outcome.committed) {
    if (outcome.streamed_tool_calls) return;
    cached.content = outcome.streamed_text;
    cached.finish_reason = outcome.streamed_finish.empty() ? answer.finish_reason : outcome.streamed_finish;
  } else if (answer.upstream_body.present()) {
    const cloud::ReplyBody& body = answer.upstream_body;
    if (!body.plain_text) return;  // several choices, tool or function calls: not one text
    cached.content = body.content;
    cached.finish_reason = body.finish_reason.empty() ? std::string("stop") : body.finish_reason;
  } else {
    cached.content = answer.content;
    cached.finish_reason = answer.finish_reason;
  }
  // A cut answer (length, content filter) is not the whole answer.
  if (cached.finish_reason != "stop"sv || cached.content.empty()) return;
  request.cache->cache->fill(request.cache->query, std::move(cached));
}

}  // namespace hengshi::chain
