// chain::Chain with scripted sources: level walking, retries and their schedule, terminal
// errors, the stream commit point, and that a PII plan never reaches a cloud source.
#include "chain/chain.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "core/response_meta.h"
#include "router/plan.h"

namespace hengshi::chain {
namespace {

// One scripted outcome of a source: an answer (with stream pieces) or an error after some pieces.
struct Step {
  std::vector<std::string> pieces;  // text pieces sent to the sink (streams)
  std::optional<AttemptError> error;
  std::string upstream = "m1";
  std::optional<bool> stream_flaky;  // set: the source names its answerer's health (as a pool does)
};

// The order in which pieces were produced and reached the client ("made:x", "open", "sent:x").
using EventLog = std::vector<std::string>;

class ScriptedSource : public AnswerSource {
 public:
  explicit ScriptedSource(std::string name, bool streams = true) : name_(std::move(name)), streams_(streams) {}
  void push(Step step) { script_.push_back(std::move(step)); }
  int calls = 0;
  EventLog* events = nullptr;
  std::vector<std::vector<std::string>> avoided;  // avoid list of each call
  std::vector<Deadline> deadlines;

  awaitable<Result<Answer, AttemptError>> answer(const SourceRequest& request) override {
    co_return co_await stream(request, nullptr);
  }
  bool streams() const override { return streams_; }
  awaitable<Result<Answer, AttemptError>> stream(const SourceRequest& request, PieceSink sink) override {
    ++calls;
    avoided.push_back(request.avoid);
    deadlines.push_back(request.deadline);
    Step step = script_.empty() ? Step{} : script_.front();
    if (!script_.empty()) script_.pop_front();
    if (step.stream_flaky && request.on_answerer) request.on_answerer(*step.stream_flaky);
    std::string text;
    for (const auto& piece : step.pieces) {
      text += piece;
      if (events) events->push_back("made:" + piece);
      if (sink && !co_await sink(Piece{Piece::Kind::text, piece})) break;
    }
    if (step.error) co_return *step.error;
    Answer answer;
    answer.content = sink ? "" : text;
    answer.model = name_;
    answer.upstream = step.upstream;
    co_return answer;
  }

 private:
  std::string name_;
  bool streams_;
  std::deque<Step> script_;
};

AttemptError error_of(ErrorClass error_class, std::string kind, std::string upstream = "m1") {
  AttemptError error;
  error.error_class = error_class;
  error.kind = std::move(kind);
  error.upstream = std::move(upstream);
  error.api = ApiError::unavailable(error.kind, "scripted");
  return error;
}

class RecordingStream : public StreamOut {
 public:
  bool opened = false;
  std::vector<std::string> sent;
  EventLog* events = nullptr;
  awaitable<bool> open(const ResponseMeta&) override {
    opened = true;
    if (events) events->push_back("open");
    co_return true;
  }
  awaitable<bool> send(const Piece& piece, const ResponseMeta&) override {
    sent.emplace_back(piece.data);
    if (events) events->push_back("sent:" + std::string(piece.data));
    co_return true;
  }
};

class ChainTest : public ::testing::Test {
 protected:
  ChainTest() {
    config_.commit.tokens = 3;
    config_.commit.first_sentence = false;
    hooks_.retry_wait = [this](int retry, std::optional<std::int64_t> retry_after, Millis left) -> std::optional<Millis> {
      waits_.push_back({retry, retry_after.value_or(-1)});
      if (retry >= 3 || left.count() <= 0) return std::nullopt;
      return Millis(0);  // no real waiting in unit tests
    };
  }

  ChainResult run(const Plan& plan, Budget budget = Budget::after(Millis(10'000)), StreamOut* stream = nullptr) {
    Chain chain(config_, hooks_);
    ChainRequest request;
    request.request = &chat_;
    request.stream = stream;
    request.sources = [this](Source source) -> AnswerSource* {
      auto it = sources_.find(source);
      return it == sources_.end() ? nullptr : it->second;
    };
    ChainResult result;
    bool done = false;
    asio::io_context io;
    asio::co_spawn(io, chain.execute(plan, budget, request, meta_, result), [&](std::exception_ptr failure) {
      if (failure) std::rethrow_exception(failure);
      done = true;
    });
    io.run();
    EXPECT_TRUE(done) << "the chain never finished";
    return result;
  }

  static Plan plan_of(std::initializer_list<PlanStep> steps) {
    Plan plan;
    plan.steps.assign(steps.begin(), steps.end());
    return plan;
  }

  ChainConfig config_;
  ChainHooks hooks_;
  std::vector<std::pair<int, std::int64_t>> waits_;
  ChatRequest chat_;
  ResponseMeta meta_;
  std::map<Source, AnswerSource*> sources_;
};

TEST_F(ChainTest, AFailedLevelFallsThroughToTheNextAndEveryHopIsRecorded) {
  ScriptedSource edge("edge", false), small("small", false);
  edge.push({{}, error_of(ErrorClass::next_level, "edge_unavailable")});
  small.push({{"hello"}, std::nullopt, "sim-1"});
  sources_ = {{Source::edge_intent, &edge}, {Source::cloud_small, &small}};
  auto result = run(plan_of({{Level::edge, Source::edge_intent}, {Level::cloud_small, Source::cloud_small}}));
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(result.answer->content, "hello");
  EXPECT_EQ(meta_.level, 2);
  EXPECT_EQ(meta_.attempts, 2);
  ASSERT_EQ(meta_.hops.size(), 2u);
  EXPECT_EQ(meta_.hops[0].outcome, "edge_unavailable");
  EXPECT_EQ(meta_.hops[1].outcome, "ok");
  EXPECT_EQ(meta_.hops[1].attempts.at(0).upstream, "sim-1");
  EXPECT_EQ(meta_.upstream, "sim-1");
}

TEST_F(ChainTest, RetryableErrorsAreRetriedOnAnotherMemberUpToTheSchedule) {
  ScriptedSource small("small", false), large("large", false);
  for (int i = 0; i < 4; ++i) small.push({{}, error_of(ErrorClass::retryable, "server_error", "m" + std::to_string(i))});
  large.push({{"from large"}, std::nullopt});
  sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}};
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}));
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(small.calls, 4) << "one attempt and three retries";
  EXPECT_EQ(small.avoided.back(), (std::vector<std::string>{"m0", "m1", "m2"}));
  EXPECT_EQ(meta_.attempts, 5);
  EXPECT_EQ(meta_.level, 3);
  EXPECT_EQ(meta_.hops[0].attempts.size(), 4u);
}

TEST_F(ChainTest, RetryAfterReachesTheScheduleAndTheFinal429KeepsIt) {
  ScriptedSource small("small", false);
  AttemptError limited = error_of(ErrorClass::retryable, "rate_limited");
  limited.retry_after_ms = 7000;
  limited.api = ApiError::unavailable("rate_limited", "slow down");
  limited.api.status = 429;
  for (int i = 0; i < 4; ++i) small.push({{}, limited});
  sources_ = {{Source::cloud_small, &small}};
  Plan plan = plan_of({{Level::cloud_small, Source::cloud_small}});
  plan.pinned = true;
  auto result = run(plan);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->api.status, 429);
  EXPECT_EQ(result.error->retry_after_ms, 7000);
  ASSERT_FALSE(waits_.empty());
  EXPECT_EQ(waits_[0].second, 7000);
}

TEST_F(ChainTest, TerminalErrorsAndNonCloudSourcesAreNotRetried) {
  ScriptedSource small("small", false), large("large", false), llm("llm", false);
  small.push({{}, error_of(ErrorClass::terminal, "client_error")});
  llm.push({{}, error_of(ErrorClass::retryable, "edge_llm_busy")});
  sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}, {Source::edge_llm, &llm}};
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}));
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->kind, "client_error");
  EXPECT_EQ(large.calls, 0);
  meta_ = {};
  auto edge_result = run(plan_of({{Level::edge, Source::edge_llm}}));
  EXPECT_EQ(llm.calls, 1) << "only the cloud levels retry";
  EXPECT_TRUE(edge_result.error);
}

TEST_F(ChainTest, ABudgetSpentBeforeAnyLevelStartsIsADeadlineError) {
  ScriptedSource small("small", false), canned("canned", false);
  canned.push({{"sorry"}, std::nullopt, ""});
  sources_ = {{Source::cloud_small, &small}, {Source::last_resort_reply, &canned}};
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::last_resort, Source::last_resort_reply}}),
                    Budget::after(Millis(0)));
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->api.status, 504);
  EXPECT_EQ(small.calls + canned.calls, 0);
  EXPECT_EQ(meta_.hops[0].outcome, "skipped_budget_spent");
}

TEST_F(ChainTest, TheLastResortAnswersWhenEveryLevelBeforeItFailed) {
  ScriptedSource small("small", false), canned("canned", false);
  small.push({{}, error_of(ErrorClass::next_level, "bad_response")});
  canned.push({{"sorry"}, std::nullopt, ""});
  sources_ = {{Source::cloud_small, &small}, {Source::last_resort_reply, &canned}};
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::last_resort, Source::last_resort_reply}}));
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(result.answer->content, "sorry");
  EXPECT_EQ(meta_.level, 4);
  EXPECT_EQ(meta_.answered_by, "last_resort_reply");
}

TEST_F(ChainTest, EachLevelGetsItsShareOfTheRemainingBudget) {
  ScriptedSource llm("llm", false), small("small", false);
  llm.push({{}, error_of(ErrorClass::next_level, "decode_failed")});
  sources_ = {{Source::edge_llm, &llm}, {Source::cloud_small, &small}};
  const auto before = Clock::now();
  run(plan_of({{Level::edge, Source::edge_llm}, {Level::cloud_small, Source::cloud_small},
               {Level::last_resort, Source::last_resort_reply}}),
      Budget::after(Millis(10'000)));
  // L0: 70% of 10 s; L2 is the last before the resort: all but the 50 ms reserve.
  const auto l0 = std::chrono::duration_cast<Millis>(llm.deadlines.at(0).at() - before).count();
  const auto l2 = std::chrono::duration_cast<Millis>(small.deadlines.at(0).at() - before).count();
  EXPECT_NEAR(static_cast<double>(l0), 7000.0, 100.0);
  EXPECT_NEAR(static_cast<double>(l2), 9950.0, 100.0);
}

TEST_F(ChainTest, AStreamFailingBeforeTheCommitPointIsReplacedInvisibly) {
  ScriptedSource small("small"), large("large");
  small.push({{"a", "b"}, error_of(ErrorClass::next_level, "closed_early"), "m1", /*stream_flaky=*/true});
  large.push({{"x", "y", "z", "w"}, std::nullopt});
  sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}};
  RecordingStream stream;
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}),
                    Budget::after(Millis(10'000)), &stream);
  ASSERT_TRUE(result.answer);
  EXPECT_TRUE(result.streamed);
  EXPECT_EQ(stream.sent, (std::vector<std::string>{"x", "y", "z", "w"})) << "nothing of the failed attempt";
  EXPECT_EQ(meta_.level, 3);
  EXPECT_EQ(meta_.committed_after_pieces, 3) << "a replacement after a broken stream is held";
}

// Adaptive (the default): a stream from an answerer whose recent streams are healthy goes out
// piece by piece as it is made; one from a flaky answerer is held to the commit point (3 here).
TEST_F(ChainTest, AdaptiveHoldsOnlyAFlakyAnswerersStream) {
  for (bool flaky : {false, true}) {
    ScriptedSource small("small"), large("large");
    EventLog events;
    small.events = &events;
    small.push({{"a", "b", "c", "d"}, std::nullopt, "m1", flaky});
    sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}};
    RecordingStream stream;
    stream.events = &events;
    meta_ = {};
    auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}),
                      Budget::after(Millis(10'000)), &stream);
    ASSERT_TRUE(result.answer);
    if (flaky) {
      EXPECT_EQ(events, (EventLog{"made:a", "made:b", "made:c", "open", "sent:a", "sent:b", "sent:c", "made:d",
                                  "sent:d"}));
      EXPECT_EQ(meta_.committed_after_pieces, 3);
    } else {
      EXPECT_EQ(events, (EventLog{"made:a", "open", "sent:a", "made:b", "sent:b", "made:c", "sent:c", "made:d",
                                  "sent:d"}));
      EXPECT_EQ(meta_.committed_after_pieces, 0);
    }
  }
}

// Nothing could replace the stream (the last step, no retry left): there is nothing to hold for.
TEST_F(ChainTest, AdaptiveDoesNotHoldWhenNothingCouldReplaceTheStream) {
  config_.retry.enabled = false;
  ScriptedSource small("small");
  small.push({{"a", "b", "c", "d"}, std::nullopt, "m1", /*stream_flaky=*/true});
  sources_ = {{Source::cloud_small, &small}};
  RecordingStream stream;
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}}), Budget::after(Millis(10'000)), &stream);
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(meta_.committed_after_pieces, 0);
  // A retry at the same level could replace it: then the flaky stream is held.
  config_.retry.enabled = true;
  small.push({{"a", "b", "c", "d"}, std::nullopt, "m1", /*stream_flaky=*/true});
  meta_ = {};
  result = run(plan_of({{Level::cloud_small, Source::cloud_small}}), Budget::after(Millis(10'000)), &stream);
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(meta_.committed_after_pieces, 3);
}

// Once a stream of the request broke midway, its replacement is held whatever its answerer's
// record says: the trouble may not be that member's alone.
TEST_F(ChainTest, AfterAStreamBrokeMidwayTheReplacementIsHeld) {
  ScriptedSource small("small"), large("large");
  small.push({{"a", "b"}, error_of(ErrorClass::next_level, "closed_early"), "m1", /*stream_flaky=*/false});
  large.push({{"x", "y", "z", "w"}, std::nullopt, "m2", /*stream_flaky=*/false});
  sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large},
              {Source::last_resort_reply, &small}};
  RecordingStream stream;
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small},
                             {Level::cloud_large, Source::cloud_large},
                             {Level::last_resort, Source::last_resort_reply}}),
                    Budget::after(Millis(10'000)), &stream);
  ASSERT_TRUE(result.error) << "cloud-small was trusted: its stream went out and then broke";
  EXPECT_TRUE(result.error->after_first_byte);
  // The same, but the first attempt breaks before anything is sent: it was held (its answerer
  // looked flaky), and the replacement, from a trusted answerer, is held too.
  small.push({{"a", "b"}, error_of(ErrorClass::next_level, "closed_early"), "m1", /*stream_flaky=*/true});
  large.push({{"x", "y", "z", "w"}, std::nullopt, "m2", /*stream_flaky=*/false});
  RecordingStream second;
  meta_ = {};
  result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large},
                        {Level::last_resort, Source::last_resort_reply}}),
               Budget::after(Millis(10'000)), &second);
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(meta_.committed_after_pieces, 3);
  EXPECT_EQ(second.sent, (std::vector<std::string>{"x", "y", "z", "w"}));
}

// chain.commit.mode always / never, and the request's own hengshi.commit over the config.
TEST_F(ChainTest, CommitModesAlwaysAndNeverOverrideTheAnswerersHealth) {
  struct Case {
    std::optional<CommitMode> config_mode;
    std::optional<CommitMode> request_mode;
    bool flaky;
    int held;
  };
  for (const Case& c : {Case{CommitMode::always, std::nullopt, false, 3}, Case{CommitMode::never, std::nullopt, true, 0},
                        Case{CommitMode::always, CommitMode::never, true, 0},
                        Case{std::nullopt, CommitMode::always, false, 3}}) {
    config_.commit.mode = c.config_mode.value_or(CommitMode::adaptive);
    chat_.hengshi.commit = c.request_mode;
    ScriptedSource small("small"), large("large");
    small.push({{"a", "b", "c", "d"}, std::nullopt, "m1", c.flaky});
    sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}};
    RecordingStream stream;
    meta_ = {};
    auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}),
                      Budget::after(Millis(10'000)), &stream);
    ASSERT_TRUE(result.answer);
    EXPECT_EQ(meta_.committed_after_pieces, c.held);
  }
}

// The kind of every answer: a model's, or the gateway's own canned reply (L4).
TEST_F(ChainTest, TheLastResortIsACannedAnswerNotAModelAnswer) {
  ScriptedSource small("small", false), resort("resort", false);
  small.push({{}, error_of(ErrorClass::next_level, "server_error")});
  resort.push({{"busy"}, std::nullopt, ""});
  sources_ = {{Source::cloud_small, &small}, {Source::last_resort_reply, &resort}};
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::last_resort, Source::last_resort_reply}}));
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(meta_.level, 4);
  EXPECT_EQ(meta_.answer_kind, AnswerKind::canned);
  EXPECT_EQ(meta_.to_json()["answer_kind"], "canned");
  small.push({{"hi"}, std::nullopt});
  meta_ = {};
  result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::last_resort, Source::last_resort_reply}}));
  EXPECT_EQ(meta_.answer_kind, AnswerKind::model);
}

// A call the pool's panic sent to an open member is one attempt: no retry at that level.
TEST_F(ChainTest, AnAttemptAtAnOpenMemberIsNotRetried) {
  ScriptedSource small("small", false), large("large", false);
  AttemptError open_member = from_upstream([] {
    cloud::UpstreamError error;
    error.kind = cloud::UpstreamErrorKind::server_error;
    error.upstream = "m1";
    error.member_open = true;
    return error;
  }());
  EXPECT_EQ(open_member.error_class, ErrorClass::next_level);
  small.push({{}, open_member});
  large.push({{"hi"}, std::nullopt});
  sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}};
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}));
  ASSERT_TRUE(result.answer);
  EXPECT_EQ(small.calls, 1);
  EXPECT_EQ(meta_.level, 3);
  EXPECT_TRUE(meta_.hops.at(0).attempts.at(0).member_open);
  EXPECT_EQ(meta_.to_json()["hops"][0]["attempts"][0]["member_open"], true);
}

TEST_F(ChainTest, AStreamFailingAfterTheCommitPointEndsWithAnErrorNotASplice) {
  ScriptedSource small("small"), large("large");
  small.push({{"a", "b", "c", "d"}, error_of(ErrorClass::retryable, "closed_early")});
  large.push({{"x"}, std::nullopt});
  sources_ = {{Source::cloud_small, &small}, {Source::cloud_large, &large}};
  RecordingStream stream;
  auto result = run(plan_of({{Level::cloud_small, Source::cloud_small}, {Level::cloud_large, Source::cloud_large}}),
                    Budget::after(Millis(10'000)), &stream);
  ASSERT_TRUE(result.error);
  EXPECT_TRUE(result.error->after_first_byte);
  EXPECT_TRUE(result.committed);
  EXPECT_EQ(large.calls, 0);
  EXPECT_EQ(small.calls, 1) << "no retry after the commit point";
  EXPECT_EQ(stream.sent, (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST_F(ChainTest, APiiPlanNeverCallsACloudSourceWhateverFails) {
  ScriptedSource intent("intent", false), llm("llm", false), small("small", false), large("large", false),
      safe("safe", false);
  sources_ = {{Source::edge_intent, &intent}, {Source::edge_llm, &llm}, {Source::cloud_small, &small},
              {Source::cloud_large, &large}, {Source::safe_reply, &safe}};
  for (Reason reason : {Reason::pii_pin, Reason::pii_uncheckable}) {
    intent.push({{}, error_of(ErrorClass::next_level, "edge_unavailable")});
    llm.push({{}, error_of(ErrorClass::retryable, "decode_failed")});
    llm.push({{}, error_of(ErrorClass::retryable, "decode_failed")});
    safe.push({{"safe reply"}, std::nullopt, ""});
    Decision decision;
    decision.route = Route::edge;
    decision.reason = reason;
    decision.edge_engine = EdgeEngine::intent;
    router::PlanInputs inputs;
    inputs.llm_available = true;
    inputs.pools = {"cloud-small", "cloud-large"};
    meta_ = {};
    auto result = run(router::make_plan(decision, inputs));
    ASSERT_TRUE(result.answer);
    EXPECT_EQ(meta_.level, 4);
  }
  EXPECT_EQ(small.calls + large.calls, 0);
}

}  // namespace
}  // namespace hengshi::chain
