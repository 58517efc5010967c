// The edge served over HTTP by the real gateway: intent answers (JSON and SSE) trained by the
// real `hengshi train` on the shipped demo FAQ, the refusal path to cloud-small, the embedded
// LLM on a `hengshi make-test-model` GGUF, and the server refusing to start without its edge.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "integration/demo_intent_fixture.h"

namespace hengshi::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string content_of(const std::vector<json>& events) {
  std::string text;
  for (const auto& event : events) {
    if (!event.contains("choices")) continue;
    for (const auto& choice : event["choices"]) {
      if (choice.contains("delta") && choice["delta"].contains("content") && choice["delta"]["content"].is_string()) {
        text += choice["delta"]["content"].get<std::string>();
      }
    }
  }
  return text;
}

// The demo FAQ's answer for `intent`, read from the shipped data file.
std::string demo_answer(const std::string& intent) {
  std::ifstream in(source_path("data/demo_faq.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    json row = json::parse(line);
    if (row["intent"] == intent && row.contains("answer")) return row["answer"];
  }
  return {};
}

class GatewayEdgeTest : public DemoIntentFixture {
 protected:

  // Serves the demo model; the router's default band is {high, low}.
  void start_with_intent(double high = 0.5, double low = 0.3, const std::string& middle_band_route = "cloud-small",
                         const std::string& cache_yaml = GatewayOptions{}.cache_yaml) {
    policy_path_ = temp_path("policy.yaml");
    std::ofstream(policy_path_) << "confidence:\n  default_band: {high: " << high << ", low: " << low
                                << "}\n  middle_band_route: " << middle_band_route << "\n";
    GatewayOptions options;
    options.cache_yaml = cache_yaml;
    options.extra_yaml = "edge:\n  intent_model: " + *model_dir_ + "\nrouting:\n  policy_file: " + policy_path_ + "\n";
    start(options);
  }
  void TearDown() override {
    GatewayFixture::TearDown();
    if (!policy_path_.empty()) std::remove(policy_path_.c_str());
  }
  std::string policy_path_;

};

TEST_F(GatewayEdgeTest, TrainPrintsWhatItMeasured) {
  EXPECT_NE(train_output_->find("holdout accuracy"), std::string::npos) << *train_output_;
  EXPECT_NE(train_output_->find("ECE"), std::string::npos);
  EXPECT_TRUE(fs::exists(fs::path(*model_dir_) / "manifest.json"));
}

TEST_F(GatewayEdgeTest, IntentAnswerAsJson) {
  start_with_intent();
  auto reply = chat(user_message("edge", "我的订单到哪了"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  json body = reply.json();
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], demo_answer("order_status"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 0);
  const json& meta = body["hengshi"];
  EXPECT_EQ(meta["route"], "edge");
  EXPECT_EQ(meta["reason"], "high_confidence");
  EXPECT_EQ(meta["edge_engine"], "intent");
  EXPECT_EQ(meta["intent"], "order_status");
  EXPECT_GE(meta["confidence"].get<double>(), 0.5);
  EXPECT_LE(meta["confidence"].get<double>(), 1.0);
  EXPECT_EQ(meta["model"].get<std::string>().rfind("intent:", 0), 0u) << meta.dump();
  EXPECT_EQ(meta["cost"].get<double>(), 0.0);
  EXPECT_EQ(reply.header("x-hengshi-route"), "edge");
  EXPECT_EQ(sim_requests(*small_), 0);
  EXPECT_EQ(sim_requests(*large_), 0);
}

TEST_F(GatewayEdgeTest, IntentAnswerAsStream) {
  start_with_intent();
  json request = json::parse(user_message("edge-intent", "I want a refund", true));
  request["stream_options"] = {{"include_usage", true}};
  auto reply = chat(request.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.header("content-type").find("text/event-stream"), std::string::npos);
  auto events = reply.sse_events();
  ASSERT_GE(events.size(), 4u) << reply.body;
  EXPECT_EQ(content_of(events), demo_answer("refund_request"));
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  bool saw_usage = false;
  for (const auto& event : events) saw_usage |= event.contains("usage") && event["usage"].is_object();
  EXPECT_TRUE(saw_usage);
  const json& meta = events.back()["hengshi"];
  EXPECT_EQ(meta["route"], "edge");
  EXPECT_EQ(meta["intent"], "refund_request");
  EXPECT_NE(reply.body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(sim_requests(*small_), 0);
}

TEST_F(GatewayEdgeTest, OutOfScopeGoesToCloudSmallAsQualityFallback) {
  start_with_intent();
  auto reply = chat(user_message("edge", "今天天气怎么样"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  EXPECT_EQ(meta["route"], "cloud-small");
  EXPECT_EQ(meta["reason"], "out_of_scope");
  EXPECT_EQ(meta["fallback_type"], "quality");
  EXPECT_EQ(meta["intent"], "__oos__");
  EXPECT_EQ(sim_requests(*small_), 1);
}

// The edge's reading reaches the cache: a cloud answer to a question the model calls out of
// scope is filed under intent:__oos__, so the intent guard never hands it to an in-scope question
// (and an operator can drop every such answer at once).
TEST_F(GatewayEdgeTest, ACachedAnswerToAnOutOfScopeQuestionCarriesThatLabel) {
  start_with_intent(0.5, 0.3, "cloud-small", "cache: {threshold: 0.8}\n");
  auto reply = chat(user_message("edge", "今天天气怎么样"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  ASSERT_EQ(reply.json()["hengshi"]["intent"], "__oos__");
  ASSERT_EQ(chat(user_message("edge", "今天天气怎么样")).json()["hengshi"]["cache"], "exact");
  auto removed = admin_post("/admin/cache/invalidate", {}, R"({"tags": ["intent:__oos__"]})");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.json()["removed"], 1);
  EXPECT_EQ(chat(user_message("edge", "今天天气怎么样")).json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(sim_requests(*small_), 2);
}

TEST_F(GatewayEdgeTest, MiddleBandGoesToCloudSmall) {
  start_with_intent(/*high=*/1.0, /*low=*/0.0);  // nothing is ever sure enough for the edge
  auto reply = chat(user_message("edge", "我的订单到哪了"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  EXPECT_EQ(meta["route"], "cloud-small");
  EXPECT_EQ(meta["reason"], "middle_band");
  EXPECT_EQ(meta["fallback_type"], "quality");
  EXPECT_EQ(meta["intent"], "order_status");
  EXPECT_EQ(meta["figures"]["band_high"].get<double>(), 1.0);
  EXPECT_EQ(sim_requests(*small_), 1);
}

TEST_F(GatewayEdgeTest, MiddleBandEdgeAnswerIsServedOnlyWhenTheCloudCheckAgrees) {
  start_with_intent(/*high=*/1.0, /*low=*/0.0, "edge_verify");
  // The sim plays the judge: [[sim:reply=...]] in the question makes it answer exactly that.
  auto agreed = chat(user_message("auto", "我的订单到哪了 [[sim:reply=yes]]"));
  ASSERT_EQ(agreed.status, 200) << agreed.body;
  json meta = agreed.json()["hengshi"];
  EXPECT_EQ(meta["route"], "edge") << meta.dump();
  EXPECT_EQ(meta["reason"], "middle_band_verify");
  EXPECT_EQ(meta["answered_by"], "edge_intent_verified");
  EXPECT_EQ(meta["level"], 0);
  EXPECT_EQ(meta["attempts"], 1) << "one edge attempt (its check is part of it)";
  EXPECT_EQ(meta["figures"]["verify_verdict"], "yes");
  EXPECT_GT(meta["cost"].get<double>(), 0.0);  // the check is billed
  EXPECT_EQ(agreed.json()["choices"][0]["message"]["content"], demo_answer("order_status"));
  EXPECT_EQ(sim_requests(*small_), 1);

  auto refused = chat(user_message("auto", "我的订单到哪了 [[sim:reply=no]]"));
  ASSERT_EQ(refused.status, 200) << refused.body;
  meta = refused.json()["hengshi"];
  // The decision stands; the chain walked on: L0 rejected by the check, L2 cloud-small answered.
  EXPECT_EQ(meta["reason"], "middle_band_verify") << meta.dump();
  EXPECT_EQ(meta["answered_by"], "cloud-small");
  EXPECT_EQ(meta["level"], 2);
  EXPECT_EQ(meta["hops"][0]["outcome"], "rejected");
  EXPECT_EQ(meta["hops"][1]["outcome"], "ok");
  EXPECT_EQ(meta["attempts"], 2);
  EXPECT_EQ(meta["figures"]["verify_verdict"], "no");
  EXPECT_EQ(sim_requests(*small_), 3);  // the check, then the answer
}

// The intent model's doubt says the FAQ does not know the question, not that it is hard.
TEST_F(GatewayEdgeTest, LowConfidenceGoesToCloudSmall) {
  start_with_intent(/*high=*/1.0, /*low=*/1.0);
  auto reply = chat(user_message("edge", "我的订单到哪了"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json meta = reply.json()["hengshi"];
  EXPECT_EQ(meta["route"], "cloud-small");
  EXPECT_EQ(meta["reason"], "low_confidence");
  EXPECT_EQ(meta["fallback_type"], "quality");
  EXPECT_EQ(sim_requests(*small_), 1);
  EXPECT_EQ(sim_requests(*large_), 0);
}

// With a learned complexity model (trained here by the real `hengshi train-complexity`), a
// low-confidence question the model calls hard goes to cloud-large and the metadata says why.
TEST_F(GatewayEdgeTest, LowConfidenceButHardGoesToCloudLargeWithAComplexityModel) {
  const std::string rows = temp_path("complexity.jsonl");
  {
    std::ofstream out(rows);
    for (int i = 0; i < 40; ++i) {
      out << json{{"text", "Let f(x) = " + std::to_string(i + 3) +
                               "x^3 - 12x + 7. Which statement is NOT true?\nI. f'(1) = " +
                               std::to_string(3 * (i + 3) - 12) +
                               "\nII. f has 3 real roots\nA. I only\nB. II only\nAnswer:"},
                  {"small_correct", false}}
                 .dump()
          << "\n"
          << json{{"text", "where is my parcel number " + std::to_string(i)}, {"small_correct", true}}
                 .dump()
          << "\n";
    }
  }
  const std::string complexity_dir = temp_path("complexity-model");
  auto trained = ChildProcess::run({binary_path("src/cli/hengshi"), "train-complexity", "--data",
                                    rows, "--out", complexity_dir, "--large-share", "0.5"});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("cut "), std::string::npos) << trained.output;

  policy_path_ = temp_path("policy.yaml");
  std::ofstream(policy_path_) << "confidence:\n  default_band: {high: 1.0, low: 1.0}\n";
  GatewayOptions options;
  options.extra_yaml = "edge:\n  intent_model: " + *model_dir_ + "\nrouting:\n  policy_file: " +
                       policy_path_ + "\n  complexity_model: " + complexity_dir + "\n";
  start(options);

  auto hard = chat(user_message(
      "edge", "Let f(x) = 9x^3 - 12x + 7. Which statement is NOT true?\nI. f'(1) = 15\n"
              "II. f has 3 real roots\nA. I only\nB. II only\nAnswer:"));
  ASSERT_EQ(hard.status, 200) << hard.body;
  json meta = hard.json()["hengshi"];
  EXPECT_EQ(meta["route"], "cloud-large") << meta.dump();
  EXPECT_EQ(meta["reason"], "complexity_hard");
  EXPECT_GE(meta["figures"]["complexity_score"].get<double>(),
            meta["figures"]["complexity_cut"].get<double>());
  EXPECT_NE(meta["figures"]["policy"].get<std::string>().find("+cx-"), std::string::npos);

  auto easy = chat(user_message("edge", "我的订单到哪了"));
  ASSERT_EQ(easy.status, 200) << easy.body;
  meta = easy.json()["hengshi"];
  EXPECT_EQ(meta["route"], "cloud-small") << meta.dump();
  EXPECT_EQ(meta["reason"], "low_confidence");
  EXPECT_EQ(sim_requests(*large_), 1);
  EXPECT_EQ(sim_requests(*small_), 1);
  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("hengshi_router_complexity_model_total{verdict=\"hard\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("hengshi_router_complexity_model_total{verdict=\"not_hard\"} 1"),
            std::string::npos)
      << metrics;
  fs::remove_all(complexity_dir);
  std::remove(rows.c_str());
}

TEST_F(GatewayEdgeTest, ModelsListTheEdgeAndTheLogRecordsIt) {
  start_with_intent();
  auto models = get("/v1/models").json();
  std::vector<std::string> ids;
  for (const auto& model : models["data"]) ids.push_back(model["id"]);
  EXPECT_NE(std::find(ids.begin(), ids.end(), "edge"), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), "edge-intent"), ids.end());
  EXPECT_EQ(std::find(ids.begin(), ids.end(), "edge-llm"), ids.end());  // no LLM configured

  ASSERT_EQ(chat(user_message("edge", "我的订单到哪了")).status, 200);
  // Metrics and the log line are written just after the response: wait for them.
  const std::string edge_ok = "hengshi_edge_requests_total{engine=\"intent\",outcome=\"ok\"} 1";
  EXPECT_TRUE(wait_until([&] { return admin_get("/metrics").body.find(edge_ok) != std::string::npos; }))
      << admin_get("/metrics").body;
  std::string last;
  ASSERT_TRUE(wait_until([&] {
    std::ifstream in(log_path_);
    return static_cast<bool>(std::getline(in, last));
  }));
  json record = json::parse(last);
  EXPECT_EQ(record["route"], "edge");
  EXPECT_EQ(record["intent"], "order_status");
  EXPECT_EQ(last.find("订单到哪"), std::string::npos) << "the log must not hold message text";
}

TEST_F(GatewayEdgeTest, EdgeLlmWithoutAModelIs503) {
  start_with_intent();
  auto reply = chat(user_message("edge-llm", "hello"));
  EXPECT_EQ(reply.status, 503) << reply.body;
  EXPECT_EQ(reply.json()["error"]["code"], "edge_unavailable");
  EXPECT_EQ(reply.json()["hengshi"]["route"], "edge");
  expect_gateway_alive();
}

// serve with `args` must exit 2 before listening, saying `expected`.
void expect_refuses_to_start(const std::vector<std::string>& args, const std::string& expected) {
  std::vector<std::string> argv = {binary_path("src/cli/hengshi"), "serve", "--listen", "127.0.0.1:0"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto finished = ChildProcess::run(argv, std::chrono::seconds(60));
  ASSERT_TRUE(finished.exit_code.has_value()) << finished.output;
  EXPECT_EQ(*finished.exit_code, 2) << finished.output;
  EXPECT_NE(finished.output.find("refusing to start"), std::string::npos) << finished.output;
  EXPECT_NE(finished.output.find(expected), std::string::npos) << finished.output;
  EXPECT_EQ(finished.output.find("listening on"), std::string::npos) << finished.output;
}

TEST_F(GatewayEdgeTest, RefusesToStartWithAMissingIntentModel) {
  expect_refuses_to_start({"--edge-required", "--intent-model", "/nonexistent/model-dir"}, "edge.intent_model");
}

TEST_F(GatewayEdgeTest, AMissingModelLeavesTheGatewayCloudOnlyAndSaysSo) {
  GatewayOptions options;
  options.extra_yaml = "edge:\n  intent_model: /nonexistent/model-dir\n";
  start(options);
  auto ready = get("/readyz");
  ASSERT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.json()["chain"]["edge_available"], false) << ready.body;
  EXPECT_NE(ready.json()["chain"]["edge_reason"].get<std::string>().find("edge.intent_model"), std::string::npos);
  auto reply = chat(user_message("auto", "我的订单到哪了"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.json()["hengshi"]["answered_by"], "cloud-small");
  EXPECT_EQ(reply.json()["hengshi"]["reason"], "default_pool");
  EXPECT_NE(gateway_->output().find("edge unavailable, serving from the cloud only"), std::string::npos);
  EXPECT_NE(admin_get("/metrics").body.find("hengshi_edge_available 0"), std::string::npos);
}

TEST_F(GatewayEdgeTest, RefusesToStartWithACorruptIntentModel) {
  std::string copy = temp_path("corrupt-intent");
  fs::copy(*model_dir_, copy, fs::copy_options::recursive);
  for (const auto& entry : fs::directory_iterator(copy)) {
    auto name = entry.path().filename().string();
    if (name.rfind("model.", 0) == 0) fs::resize_file(entry.path(), fs::file_size(entry.path()) / 2);
  }
  expect_refuses_to_start({"--edge-required", "--intent-model", copy}, "model");
  fs::remove_all(copy);
}

TEST_F(GatewayEdgeTest, TrainRejectsBadDataNamingTheFileAndLine) {
  std::string data = temp_path("bad.jsonl");
  std::ofstream(data) << "{\"text\": \"hello\", \"intent\": \"greet\"}\n{\"text\": \"no intent here\"}\n";
  auto finished = ChildProcess::run({binary_path("src/cli/hengshi"), "train", "--data", data, "--out",
                                     temp_path("never-written"), "--search-budget", "0"});
  ASSERT_TRUE(finished.exit_code.has_value());
  EXPECT_EQ(*finished.exit_code, 2) << finished.output;
  EXPECT_NE(finished.output.find(data), std::string::npos) << finished.output;
  EXPECT_NE(finished.output.find(data + ":2:"), std::string::npos) << finished.output;  // file:line
  std::remove(data.c_str());
}

#ifdef HENGSHI_HAVE_LLAMA
// The embedded LLM on a tiny random-weight GGUF written by `hengshi make-test-model`.
class GatewayEdgeLlmTest : public GatewayFixture {
 protected:
  static void SetUpTestSuite() {
    model_path_ = new std::string(temp_path("edge-test.gguf"));
    auto made = ChildProcess::run({binary_path("src/cli/hengshi"), "make-test-model", "--out", *model_path_});
    make_output_ = new std::string(made.output);
    make_ok_ = made.exit_code == 0;
  }
  static void TearDownTestSuite() {
    std::remove(model_path_->c_str());
    delete model_path_;
    delete make_output_;
  }
  void SetUp() override {
    ASSERT_TRUE(make_ok_) << *make_output_;
    GatewayOptions options;
    options.extra_yaml = "edge:\n  llm:\n    model_path: " + *model_path_ + "\n    threads: 1\n    max_tokens: 16\n";
    start(options);
  }
  static std::string* model_path_;
  static std::string* make_output_;
  static bool make_ok_;
};
std::string* GatewayEdgeLlmTest::model_path_ = nullptr;
std::string* GatewayEdgeLlmTest::make_output_ = nullptr;
bool GatewayEdgeLlmTest::make_ok_ = false;

TEST_F(GatewayEdgeLlmTest, GeneratesAsJsonWithTokenConfidence) {
  json request = json::parse(user_message("edge-llm", "Hello, who are you?"));
  request["max_tokens"] = 8;
  auto reply = chat(request.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  json body = reply.json();
  EXPECT_TRUE(body["choices"][0]["message"]["content"].is_string());
  EXPECT_GT(body["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(body["usage"]["completion_tokens"].get<int>(), 8);
  const json& meta = body["hengshi"];
  EXPECT_EQ(meta["route"], "edge");
  EXPECT_EQ(meta["edge_engine"], "llm");
  double confidence = meta["confidence"].get<double>();
  EXPECT_GT(confidence, 0.0);
  EXPECT_LE(confidence, 1.0);
  EXPECT_GT(meta["figures"]["token_min_prob"].get<double>(), 0.0);
  EXPECT_NE(meta["model"].get<std::string>().find("qwen2"), std::string::npos) << meta.dump();
  EXPECT_EQ(sim_requests(*small_), 0);
}

TEST_F(GatewayEdgeLlmTest, StreamsPiecesThenMetadata) {
  json request = json::parse(user_message("edge-llm", "Tell me a story", true));
  request["max_tokens"] = 12;
  auto reply = chat(request.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto events = reply.sse_events();
  ASSERT_GE(events.size(), 3u) << reply.body;
  const json& meta = events.back()["hengshi"];
  EXPECT_EQ(meta["route"], "edge");
  EXPECT_EQ(meta["edge_engine"], "llm");
  std::string finish;
  for (const auto& event : events) {
    for (const auto& choice : event.value("choices", json::array())) {
      if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
    }
  }
  EXPECT_TRUE(finish == "stop" || finish == "length") << reply.body;
  EXPECT_NE(reply.body.find("data: [DONE]"), std::string::npos);
  // The pieces are the answer, each exactly once: greedy decoding gives the same text as JSON.
  const std::string streamed = content_of(events);
  request["stream"] = false;
  auto whole = chat(request.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(streamed, whole.json()["choices"][0]["message"]["content"].get<std::string>());
}

TEST(GatewayEdgeLlmStart, RefusesAnUnsupportedArchitecture) {
  std::string path = temp_path("bogus-arch.gguf");
  auto made = ChildProcess::run({binary_path("src/cli/hengshi"), "make-test-model", "--arch", "bogus", "--out", path});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  expect_refuses_to_start({"--edge-required", "--llm-model", path}, "edge.llm.model_path");
  std::remove(path.c_str());
}
#endif

}  // namespace
}  // namespace hengshi::testing
