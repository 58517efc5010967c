// Shadow inference: the similarity function, the should-shadow rule (sampling, middle band, task
// types, PII), and the runner — its log line (figures, never texts), its bound on shadows in
// flight, a real cloud call to an in-process upstream, and stop() ending a hanging call at once.
#include "chain/shadow.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cloud/fake_upstream.h"
#include "obs/metrics.h"
#include "support/child_process.h"
#include "support/wait_until.h"

namespace hengshi::chain {
namespace {

using cloud::testing::FakeReply;
using cloud::testing::FakeUpstream;
using hengshi::testing::temp_path;
using hengshi::testing::wait_until;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kShadowKeyEnv = "HENGSHI_SHADOW_TEST_KEY";

// ---- text_similarity ----

TEST(TextSimilarityTest, IdenticalTextsAreOneAndDisjointTextsZero) {
  EXPECT_DOUBLE_EQ(text_similarity("您的订单已发货", "您的订单已发货"), 1.0);
  EXPECT_DOUBLE_EQ(text_similarity("hello world", "hello world"), 1.0);
  EXPECT_DOUBLE_EQ(text_similarity("退款三天到账", "xyz"), 0.0);
}

TEST(TextSimilarityTest, ChineseOverlapIsJaccardOfCharacterBigrams) {
  // 订单已发货 {订单 单已 已发 发货} vs 订单未发货 {订单 单未 未发 发货}: 2 shared of 6.
  EXPECT_DOUBLE_EQ(text_similarity("订单已发货", "订单未发货"), 2.0 / 6.0);
}

TEST(TextSimilarityTest, EnglishIgnoresCaseAndExtraWhitespace) {
  EXPECT_DOUBLE_EQ(text_similarity("Your Order  shipped", " your order shipped\n"), 1.0);
  const double partial = text_similarity("your order shipped", "your order is late");
  EXPECT_GT(partial, 0.2);
  EXPECT_LT(partial, 0.8);
}

TEST(TextSimilarityTest, IsSymmetricAndBounded) {
  const std::vector<std::string> texts = {
      "", "a", "ab", "订单", "您好，订单已发货。", "refund in 3 days", "\xff\xfe"};
  for (const auto& a : texts) {
    for (const auto& b : texts) {
      const double s = text_similarity(a, b);
      EXPECT_GE(s, 0.0) << a << " | " << b;
      EXPECT_LE(s, 1.0) << a << " | " << b;
      EXPECT_DOUBLE_EQ(s, text_similarity(b, a)) << a << " | " << b;
    }
  }
}

TEST(TextSimilarityTest, EmptyAndSingleCharacterTexts) {
  EXPECT_DOUBLE_EQ(text_similarity("", ""), 1.0);
  EXPECT_DOUBLE_EQ(text_similarity("", "hi"), 0.0);
  EXPECT_DOUBLE_EQ(text_similarity("是", "是"), 1.0);
  EXPECT_DOUBLE_EQ(text_similarity("是", "否"), 0.0);
}

TEST(TextSimilarityTest, InvalidUtf8IsComparedBytewiseWithoutHarm) {
  EXPECT_DOUBLE_EQ(text_similarity("\xe8\xae", "\xe8\xae"), 1.0);
  EXPECT_DOUBLE_EQ(text_similarity("\xe8\xae", "订"), 0.0);  // a cut sequence is not the character
}

TEST(CompareAnswersTest, SameIntentDecidesWhenBothSidesNameOne) {
  auto same = compare_answers("refund", "text a", "refund", "completely different");
  ASSERT_TRUE(same.same_intent.has_value());
  EXPECT_TRUE(*same.same_intent);
  EXPECT_DOUBLE_EQ(same.agreement, 1.0);
  EXPECT_LT(same.similarity, 0.5);
  auto other = compare_answers("refund", "same text", "order_status", "same text");
  EXPECT_DOUBLE_EQ(other.agreement, 0.0);
  EXPECT_DOUBLE_EQ(other.similarity, 1.0);
}

TEST(CompareAnswersTest, TextSimilarityWhenAnIntentIsMissing) {
  auto result = compare_answers("refund", "订单已发货", "", "订单未发货");
  EXPECT_FALSE(result.same_intent.has_value());
  EXPECT_DOUBLE_EQ(result.agreement, result.similarity);
  EXPECT_DOUBLE_EQ(result.similarity, 2.0 / 6.0);
}

// ---- should_shadow ----

ShadowConfig config_at(double rate, std::vector<std::string> task_types = {}) {
  ShadowConfig config;
  config.sample_rate = rate;
  config.task_types = std::move(task_types);
  return config;
}

ShadowFacts edge_answer(Reason reason = Reason::middle_band_verify) {
  ShadowFacts facts;
  facts.reason = reason;
  facts.plan_includes_cloud = true;
  facts.answered_by = "edge_intent_verified";
  facts.cloud_small_usable = true;
  facts.edge_prediction_answers = true;
  return facts;
}

ShadowFacts cloud_answer(Reason reason = Reason::middle_band) {
  ShadowFacts facts = edge_answer(reason);
  facts.answered_by = "cloud-small";
  return facts;
}

TEST(ShouldShadowTest, RateZeroNeverAndRateOneAlways) {
  for (double draw : {0.0, 0.3, 0.999999}) {
    EXPECT_EQ(should_shadow(config_at(0.0), edge_answer(), draw), ShadowAction::none);
    EXPECT_EQ(should_shadow(config_at(1.0), edge_answer(), draw), ShadowAction::ask_cloud_small);
  }
}

TEST(ShouldShadowTest, SampledWhenTheDrawIsBelowTheRate) {
  EXPECT_EQ(should_shadow(config_at(0.25), edge_answer(), 0.2499), ShadowAction::ask_cloud_small);
  EXPECT_EQ(should_shadow(config_at(0.25), edge_answer(), 0.25), ShadowAction::none);
}

TEST(ShouldShadowTest, OnlyTheMiddleBandOrAListedTaskType) {
  EXPECT_EQ(should_shadow(config_at(1.0), edge_answer(Reason::middle_band), 0.5),
            ShadowAction::ask_cloud_small);
  EXPECT_EQ(should_shadow(config_at(1.0), edge_answer(Reason::high_confidence), 0.5),
            ShadowAction::none);
  EXPECT_EQ(should_shadow(config_at(1.0), cloud_answer(Reason::low_confidence), 0.5),
            ShadowAction::none);
  ShadowFacts faq = edge_answer(Reason::high_confidence);
  faq.task_type = "faq";
  EXPECT_EQ(should_shadow(config_at(1.0, {"faq"}), faq, 0.5), ShadowAction::ask_cloud_small);
  EXPECT_EQ(should_shadow(config_at(1.0, {"chat"}), faq, 0.5), ShadowAction::none);
  EXPECT_EQ(should_shadow(config_at(0.0, {"faq"}), faq, 0.5), ShadowAction::none)
      << "the rate applies too";
}

TEST(ShouldShadowTest, APiiRequestIsNeverShadowedToTheCloud) {
  for (Reason reason : {Reason::pii_pin, Reason::pii_uncheckable, Reason::non_text_refused}) {
    ShadowFacts facts = edge_answer(reason);
    facts.task_type = "faq";
    EXPECT_EQ(should_shadow(config_at(1.0, {"faq"}), facts, 0.0), ShadowAction::skipped_pii)
        << reason;
    facts.plan_includes_cloud = false;
    EXPECT_EQ(should_shadow(config_at(1.0, {"faq"}), facts, 0.0), ShadowAction::skipped_pii)
        << reason;
  }
}

TEST(ShouldShadowTest, NoCloudCallWhenThePlanOrTheKeyKeepsTheRequestOffIt) {
  ShadowFacts edge_only = edge_answer(Reason::middle_band);
  edge_only.plan_includes_cloud = false;  // offline, or a pinned edge model
  EXPECT_EQ(should_shadow(config_at(1.0), edge_only, 0.0), ShadowAction::no_other_path);
  ShadowFacts no_pool = edge_answer();
  no_pool.cloud_small_usable = false;
  EXPECT_EQ(should_shadow(config_at(1.0), no_pool, 0.0), ShadowAction::no_other_path);
}

TEST(ShouldShadowTest, ACloudAnswerIsComparedWithTheEdgePredictionWhenThereIsOne) {
  EXPECT_EQ(should_shadow(config_at(1.0), cloud_answer(), 0.0),
            ShadowAction::compare_edge_prediction);
  ShadowFacts large = cloud_answer();
  large.answered_by = "cloud-large";
  EXPECT_EQ(should_shadow(config_at(1.0), large, 0.0), ShadowAction::compare_edge_prediction);
  ShadowFacts no_prediction = cloud_answer();
  no_prediction.edge_prediction_answers = false;
  EXPECT_EQ(should_shadow(config_at(1.0), no_prediction, 0.0), ShadowAction::no_other_path);
}

TEST(ShouldShadowTest, CannedRepliesAreNotShadowed) {
  for (const char* canned : {"safe_reply", "last_resort_reply", "human_handoff", ""}) {
    ShadowFacts facts = edge_answer(Reason::middle_band);
    facts.answered_by = canned;
    EXPECT_EQ(should_shadow(config_at(1.0), facts, 0.0), ShadowAction::none) << canned;
  }
}

// ---- ShadowRunner ----

double metric(const std::string& name, const obs::Labels& labels = {}) {
  return obs::Registry::global().counter(name, "", labels).value();
}
double shadow_total(const std::string& outcome) {
  return metric("hengshi_shadow_total", {{"outcome", outcome}});
}

class ShadowRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv(kShadowKeyEnv, "sk-shadow-test", 1);
    log_path_ = temp_path("shadow-log.jsonl");
    auto opened = obs::RequestLog::open(log_path_);
    ASSERT_TRUE(opened.ok());
    log_ = std::move(opened).value();
    request_.set_body({{"model", "auto"},
                       {"stream", true},
                       {"messages", {{{"role", "user"}, {"content", "我的订单"}}}}});
    request_.hengshi.task_type = "faq";
    prediction_.intent = "order_status";
    prediction_.answer = "您的订单已发货，预计明天送达。";
    prediction_.is_oos = false;
    meta_.request_id = "hs-test-1";
    meta_.decision.reason = Reason::middle_band;
    meta_.decision.intent = "order_status";
    meta_.decision.plan.steps = {{Level::edge, Source::edge_intent_verified},
                                 {Level::cloud_small, Source::cloud_small}};
  }
  void TearDown() override {
    pool_.reset();
    log_.reset();
    std::remove(log_path_.c_str());
    ::unsetenv(kShadowKeyEnv);
  }

  void make_pool(const std::string& url, std::int64_t ttft_timeout_ms = 5000) {
    UpstreamConfig member;
    member.name = "small-1";
    member.base_url = url;
    member.model = "sim-small";
    member.api_key_env = kShadowKeyEnv;
    member.connect_timeout_ms = 1000;
    member.ttft_timeout_ms = ttft_timeout_ms;
    member.total_timeout_ms = 20000;
    member.price_input_per_1k = 1.0;
    member.price_output_per_1k = 2.0;
    PoolConfig config;
    config.name = "cloud-small";
    config.members = {member};
    auto created = cloud::CloudPool::create(config, nullptr);
    ASSERT_TRUE(created.ok()) << created.error().message;
    pool_ = std::move(created).value();
  }

  ShadowOffer offer() {
    ShadowOffer out;
    out.request = &request_;
    out.meta = &meta_;
    out.answer = &answer_;
    out.prediction = &prediction_;
    return out;
  }

  // The log's lines, once it wrote everything queued.
  std::vector<json> log_lines() {
    EXPECT_TRUE(log_->flush(5s));
    std::ifstream in(log_path_);
    std::vector<json> lines;
    std::string line;
    while (std::getline(in, line)) lines.push_back(json::parse(line));
    return lines;
  }
  std::string log_text() {
    EXPECT_TRUE(log_->flush(5s));
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  asio::io_context io_;  // first: the pool's connections die before it
  std::unique_ptr<cloud::CloudPool> pool_;
  std::string log_path_;
  std::unique_ptr<obs::RequestLog> log_;
  ChatRequest request_;
  ResponseMeta meta_;
  Answer answer_;
  edge::IntentPrediction prediction_;
};

TEST_F(ShadowRunnerTest, ACloudAnswerIsComparedWithThePredictionAndOnlyFiguresAreLogged) {
  meta_.answered_by = "cloud-small";
  answer_.upstream_body =
      cloud::read_reply_body(cloud::testing::completion_body("sim-small", "您的订单已经发货了")).value();
  const double ok_before = shadow_total("ok");
  ShadowRunner runner(config_at(1.0), nullptr, *log_, {.max_in_flight = 16, .seed = 7});
  runner.offer(io_.get_executor(), offer());
  io_.run();
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 1u);
  const json& line = lines[0];
  EXPECT_EQ(line["shadow"], true);
  EXPECT_EQ(line["id"], "hs-test-1");
  EXPECT_EQ(line["answered_by"], "cloud-small");
  EXPECT_EQ(line["shadow_source"], "edge_intent");
  EXPECT_EQ(line["outcome"], "ok");
  EXPECT_DOUBLE_EQ(line["similarity"].get<double>(),
                   text_similarity("您的订单已经发货了", prediction_.answer));
  EXPECT_DOUBLE_EQ(line["agreement"].get<double>(), line["similarity"].get<double>());
  EXPECT_EQ(line["shadow_cost"], 0.0);
  EXPECT_EQ(shadow_total("ok"), ok_before + 1);
  const std::string text = log_text();
  EXPECT_EQ(text.find("订单"), std::string::npos) << "no answer text in the log: " << text;
}

TEST_F(ShadowRunnerTest, AnEdgeAnswerAsksCloudSmallAndCountsItsCostApart) {
  FakeUpstream upstream;
  upstream.reply_always(
      FakeReply{.body = cloud::testing::completion_body("sim-small", "您的订单已发货")});
  make_pool(upstream.base_url());
  meta_.answered_by = "edge_intent_verified";
  answer_.content = prediction_.answer;
  const double cost_before = metric("hengshi_shadow_cost_total");
  ShadowRunner runner(config_at(1.0), pool_.get(), *log_, {.max_in_flight = 16, .seed = 7});
  runner.offer(io_.get_executor(), offer());
  EXPECT_EQ(runner.in_flight(), 1u);
  io_.run();
  EXPECT_EQ(runner.in_flight(), 0u);
  auto requests = upstream.requests();
  ASSERT_EQ(requests.size(), 1u);
  const json sent = json::parse(requests[0].body);
  EXPECT_FALSE(sent.value("stream", false)) << "the shadow call is not streamed: " << sent.dump();
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "ok");
  EXPECT_EQ(lines[0]["shadow_source"], "cloud-small");
  // 11 prompt + 7 completion tokens at 1.0 / 2.0 per 1k.
  EXPECT_DOUBLE_EQ(lines[0]["shadow_cost"].get<double>(), 0.011 + 0.014);
  EXPECT_NEAR(metric("hengshi_shadow_cost_total") - cost_before, 0.025, 1e-9);
  EXPECT_GT(lines[0]["similarity"].get<double>(), 0.0);
  EXPECT_LT(lines[0]["similarity"].get<double>(), 1.0);
}

TEST_F(ShadowRunnerTest, APiiRequestIsLoggedAsSkippedAndNothingIsCalled) {
  FakeUpstream upstream;
  make_pool(upstream.base_url());
  meta_.answered_by = "edge_intent";
  meta_.decision.reason = Reason::pii_pin;
  meta_.decision.plan.steps = {{Level::edge, Source::edge_intent},
                               {Level::last_resort, Source::safe_reply}};
  answer_.content = prediction_.answer;
  const double skipped_before = shadow_total("skipped_pii");
  ShadowRunner runner(config_at(1.0, {"faq"}), pool_.get(), *log_,
                      {.max_in_flight = 16, .seed = 7});
  runner.offer(io_.get_executor(), offer());
  io_.run();
  EXPECT_EQ(upstream.accepted(), 0);
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "skipped_pii");
  EXPECT_EQ(shadow_total("skipped_pii"), skipped_before + 1);
}

TEST_F(ShadowRunnerTest, ShadowsBeyondTheBoundAreDropped) {
  meta_.answered_by = "cloud-small";
  answer_.upstream_body = cloud::read_reply_body(cloud::testing::completion_body("sim-small", "x")).value();
  const double dropped_before = shadow_total("dropped");
  ShadowRunner runner(config_at(1.0), nullptr, *log_, {.max_in_flight = 1, .seed = 7});
  runner.offer(io_.get_executor(), offer());  // runs (io not yet running: it stays in flight)
  runner.offer(io_.get_executor(), offer());  // over the bound
  EXPECT_EQ(runner.in_flight(), 1u);
  io_.run();
  EXPECT_EQ(shadow_total("dropped"), dropped_before + 1);
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["outcome"], "dropped");
  EXPECT_EQ(lines[1]["outcome"], "ok");
}

TEST_F(ShadowRunnerTest, StopCancelsAHangingShadowAtOnceAndLaterOffersAreNoOps) {
  FakeUpstream upstream;
  upstream.reply_always(FakeReply{.hang = true});
  make_pool(upstream.base_url(), /*ttft_timeout_ms=*/15000);
  meta_.answered_by = "edge_intent_verified";
  answer_.content = prediction_.answer;
  ShadowConfig config = config_at(1.0);
  config.timeout_ms = 15000;
  ShadowRunner runner(config, pool_.get(), *log_, {.max_in_flight = 16, .seed = 7});
  runner.offer(io_.get_executor(), offer());
  std::thread io_thread([this] { io_.run(); });
  ASSERT_TRUE(wait_until([&] { return upstream.requests().size() == 1u; }));
  const auto stopping = Clock::now();
  runner.stop();
  io_thread.join();  // the io_context ran out of work: nothing waits for the 15 s timeout
  EXPECT_LT(Clock::now() - stopping, 2s);
  EXPECT_EQ(runner.in_flight(), 0u);
  runner.offer(io_.get_executor(), offer());
  EXPECT_EQ(runner.in_flight(), 0u);
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "cancelled");
}

TEST_F(ShadowRunnerTest, AnUnansweredShadowEndsAtItsTimeout) {
  FakeUpstream upstream;
  upstream.reply_always(FakeReply{.hang = true});
  make_pool(upstream.base_url(), /*ttft_timeout_ms=*/15000);
  meta_.answered_by = "edge_intent_verified";
  answer_.content = prediction_.answer;
  ShadowConfig config = config_at(1.0);
  config.timeout_ms = 200;
  ShadowRunner runner(config, pool_.get(), *log_, {.max_in_flight = 16, .seed = 7});
  const auto started = Clock::now();
  runner.offer(io_.get_executor(), offer());
  io_.run();
  EXPECT_LT(Clock::now() - started, 5s);
  auto lines = log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "timeout");
}

TEST_F(ShadowRunnerTest, RateZeroWritesNothing) {
  meta_.answered_by = "cloud-small";
  answer_.upstream_body = cloud::read_reply_body(cloud::testing::completion_body("sim-small", "x")).value();
  ShadowRunner runner(config_at(0.0), nullptr, *log_);
  runner.offer(io_.get_executor(), offer());
  io_.run();
  EXPECT_TRUE(log_lines().empty());
}

}  // namespace
}  // namespace hengshi::chain
