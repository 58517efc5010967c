// The operator's view through the real gateway: /admin/stats and /metrics after real traffic
// (answer kinds apart from statuses, the route mix, the edge fallback rate over the requests that
// entered the edge, the shadow's false-fallback samples, billed cost against the all-cloud-large
// counterfactual), and the request log's opt-in text and versions — never for a PII request.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "integration/demo_intent_fixture.h"

namespace hengshi::testing {
namespace {

using nlohmann::json;

class GatewayOperateTest : public DemoIntentFixture {
 protected:
  void TearDown() override {
    GatewayFixture::TearDown();
    if (!policy_path_.empty()) std::remove(policy_path_.c_str());
  }

  // Every in-scope question lands in the middle band and goes to cloud-small (a quality fallback
  // after the edge was consulted); every such answer is shadowed by the edge's prediction.
  void start_middle_band_to_cloud() {
    policy_path_ = temp_path("operate-policy.yaml");
    std::ofstream(policy_path_) << "confidence:\n  default_band: {high: 1.0, low: 0.0}\n"
                                << "  middle_band_route: cloud-small\n";
    GatewayOptions options;
    options.extra_yaml = "edge:\n  intent_model: " + *model_dir_ + "\nrouting:\n  policy_file: " + policy_path_ +
                         "\nchain:\n  shadow:\n    sample_rate: 1.0\n";
    options.log_yaml = "  text: true\n";
    options.large_member_yaml = "        price_input_per_1k: 10.0\n        price_output_per_1k: 30.0\n";
    start(options);
  }

  std::vector<json> request_lines() {
    std::ifstream in(log_path_);
    std::vector<json> out;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      json record = json::parse(line);
      if (!record.value("shadow", false)) out.push_back(std::move(record));
    }
    return out;
  }
  json stats() {
    auto reply = admin_get("/admin/stats");
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.json();
  }

  std::string policy_path_;
};

TEST_F(GatewayOperateTest, StatsCountRoutesCostFallbacksAndShadowSamplesFromRealTraffic) {
  start_middle_band_to_cloud();
  const std::vector<std::string> questions = {"我的订单到哪了", "退款什么时候到账", "运费多少", "忘记密码了"};
  for (const auto& question : questions) {
    auto reply = chat(user_message("auto", question + " [[sim:reply=yes]]"));
    ASSERT_EQ(reply.status, 200) << reply.body;
    ASSERT_EQ(reply.json()["hengshi"]["answered_by"], "cloud-small") << reply.body;
    ASSERT_EQ(reply.json()["hengshi"]["fallback_type"], "quality") << reply.body;
  }
  const double n = static_cast<double>(questions.size());
  // The shadows run after each answer: wait for all their verdicts.
  ASSERT_TRUE(wait_until([&] { return stats()["shadow"]["false_fallback"]["samples"] == n; })) << stats().dump(2);

  const json s = stats();
  EXPECT_EQ(s["requests"], n);
  EXPECT_EQ(s["answers"]["model"], n);
  EXPECT_EQ(s["answers"]["canned"], 0.0);
  EXPECT_DOUBLE_EQ(s["routes"]["cloud-small"]["share"].get<double>(), 1.0) << s.dump(2);
  // Every request entered the edge (its model was consulted) and fell back for quality.
  EXPECT_EQ(s["edge_fallback"]["entered"], n);
  EXPECT_DOUBLE_EQ(s["edge_fallback"]["rate"].get<double>(), 1.0);
  EXPECT_EQ(s["edge_fallback"]["by_type"]["quality"], n);
  // "yes" is not the FAQ answer the edge would have given: no false fallback, over n samples;
  // nothing was served by the edge, so its missed-fallback rate has no samples and no value.
  EXPECT_DOUBLE_EQ(s["shadow"]["false_fallback"]["rate"].get<double>(), 0.0);
  EXPECT_TRUE(s["shadow"]["missed_fallback"]["rate"].is_null());
  EXPECT_EQ(s["shadow"]["missed_fallback"]["samples"], 0.0);
  // Billed at cloud-small's prices (1/2 per 1k), counterfactual at cloud-large's (10/30).
  const double billed = s["cost"]["billed"].get<double>();
  const double all_large = s["cost"]["all_cloud_large"].get<double>();
  EXPECT_GT(billed, 0.0);
  EXPECT_GT(all_large, 5 * billed);
  EXPECT_NEAR(s["cost"]["saved"].get<double>(), all_large - billed, 1e-9);
  EXPECT_EQ(s["latency"]["cloud-small"]["requests"], questions.size());
  EXPECT_EQ(s["offline"], false);
  EXPECT_EQ(s["breakers"]["cloud-small/small-1"], "closed");

  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("hengshi_requests_total{route=\"cloud-small\",reason=\"middle_band\",level=\"L2\","
                         "kind=\"model\",task_type=\"none\",status=\"200\"} 4"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("hengshi_edge_entered_total{task_type=\"none\"} 4"), std::string::npos);

  // The log: every line has its versions and counterfactual; text because log.text is on.
  ASSERT_TRUE(wait_until([&] { return request_lines().size() == questions.size(); }));
  const auto lines = request_lines();
  // One line per question. A line is written after its answer went out, so the next request can
  // log first (seen under ASan): the lines are matched as a set, not by position.
  std::vector<std::string> prompts;
  std::vector<std::string> expected_prompts;
  for (const auto& line : lines) prompts.push_back(line["text"]["prompt"].get<std::string>());
  for (const auto& question : questions) expected_prompts.push_back(question + " [[sim:reply=yes]]");
  std::sort(prompts.begin(), prompts.end());
  std::sort(expected_prompts.begin(), expected_prompts.end());
  EXPECT_EQ(prompts, expected_prompts);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["schema"], 1);
    EXPECT_EQ(lines[i]["text"]["answer"], "yes");
    EXPECT_TRUE(lines[i]["versions"]["edge_intent"].is_string()) << lines[i].dump();
    EXPECT_TRUE(lines[i]["versions"]["policy"].is_string());
    EXPECT_GT(lines[i]["cost_all_cloud_large"].get<double>(), lines[i]["cost"].get<double>());
    EXPECT_EQ(lines[i]["entered_edge"], true);
  }
}

TEST_F(GatewayOperateTest, ReplayReRunsTheLoggedTrafficThroughACandidateModel) {
  start_middle_band_to_cloud();
  // The cloud (the sim) answers each question with the FAQ's own answer: the candidate's edge
  // answer would have passed, so each of these cloud calls was a false fallback.
  const std::vector<std::pair<std::string, std::string>> faq = {
      {"我要退款", "refund_request"}, {"运费多少", "shipping_cost"}, {"忘记密码了", "password_reset"}};
  for (const auto& [question, intent] : faq) {
    auto reply = chat(user_message("auto", question));
    ASSERT_EQ(reply.status, 200) << reply.body;
  }
  auto other = chat(user_message("auto", "今天天气怎么样 [[sim:reply=晴天]]"));
  ASSERT_EQ(other.status, 200) << other.body;
  ASSERT_TRUE(wait_until([&] { return request_lines().size() == faq.size() + 1; }));
  gateway_.reset();  // the log is complete and closed

  // Labels say what each question is; the weather question is out of scope.
  const std::string labels = temp_path("replay-labels.jsonl");
  {
    std::ofstream out(labels);
    for (const auto& [question, intent] : faq) out << json{{"text", question}, {"intent", intent}}.dump() << "\n";
  }
  auto run = ChildProcess::run({binary_path("src/cli/hengshi"), "replay", "--log", log_path_, "--model", *model_dir_,
                                "--labels", labels, "--target-precision", "0.9", "--json"});
  std::remove(labels.c_str());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json report = json::parse(run.stdout_text);
  EXPECT_EQ(report["requests"], faq.size() + 1);
  EXPECT_EQ(report["with_text"], faq.size() + 1);
  EXPECT_EQ(report["reference_kinds"]["label"], faq.size()) << report.dump(2);
  // Production sent everything to cloud-small; the candidate at the default band (0.85) keeps
  // what it is sure of at the edge, and every row it judged carries a sample.
  EXPECT_EQ(report["production"]["requests"]["cloud-small"], faq.size() + 1);
  const json overall = report["overall"];
  EXPECT_EQ(overall["false_fallback"]["samples"].get<std::size_t>() + overall["missed_fallback"]["samples"].get<std::size_t>(),
            overall["rows"].get<std::size_t>());
  std::size_t binned = 0;
  for (const auto& bin : overall["bins"]) binned += bin["rows"].get<std::size_t>();
  // The bins hold the rows with an edge answer; the weather question (out of scope) has none.
  EXPECT_EQ(binned, overall["answering"].get<std::size_t>());
  EXPECT_LT(overall["answering"].get<std::size_t>(), overall["rows"].get<std::size_t>()) << overall.dump(2);
  // The demo model knows these FAQ questions: a threshold reaches 90% on them.
  EXPECT_TRUE(overall["chosen_threshold"].is_number()) << overall.dump(2);
  EXPECT_LE(report["candidate"]["cost"].get<double>(), report["production"]["cost"].get<double>() + 1e-12);

  // The table form prints the same report for a person.
  auto table = ChildProcess::run({binary_path("src/cli/hengshi"), "replay", "--log", log_path_, "--model", *model_dir_});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.stdout_text.find("false fallback"), std::string::npos) << table.stdout_text;
  EXPECT_NE(table.stdout_text.find("route mix"), std::string::npos);
}

// The weekly refit: `calibrate --traffic-log` reads the questions production logged (log.text)
// and weights the calibration rows to the intent mix the model predicts on them.
TEST_F(GatewayOperateTest, CalibrateFitsTheIntentMixOfTheLoggedQuestions) {
  start_middle_band_to_cloud();
  const std::vector<std::string> asked = {"我要退款", "我要退款", "我要退款", "运费多少", "今天天气怎么样"};
  for (const std::string& question : asked) {
    auto reply = chat(user_message("auto", question));
    ASSERT_EQ(reply.status, 200) << reply.body;
  }
  ASSERT_TRUE(wait_until([&] { return request_lines().size() == asked.size(); }));
  gateway_.reset();  // the log is complete and closed

  const std::string hengshi = binary_path("src/cli/hengshi");
  const std::string out = temp_path("traffic-thresholds.json");
  auto fitted = ChildProcess::run({hengshi, "calibrate", "--model", *model_dir_, "--data",
                                   source_path("data/demo_faq.jsonl"), "--target-precision", "0.95",
                                   "--traffic-log", log_path_, "--out", out});
  ASSERT_EQ(fitted.exit_code, 0) << fitted.output;
  EXPECT_NE(fitted.output.find("intent mix from 5 logged questions"), std::string::npos) << fitted.output;
  EXPECT_NE(fitted.output.find("in-scope rows weighted to the traffic's mix over"), std::string::npos) << fitted.output;
  std::ifstream in(out);
  const json file = json::parse(in, nullptr, false);
  ASSERT_TRUE(file.is_object()) << out;
  EXPECT_TRUE(file["notes"].contains("intent_prior")) << file.dump(2);
  std::remove(out.c_str());

  // A log written without log.text holds no question: refused, and nothing written.
  const std::string bare = temp_path("traffic-bare.jsonl");
  {
    std::ofstream stripped(bare);
    for (json record : request_lines()) {
      record.erase("text");
      stripped << record.dump() << "\n";
    }
  }
  auto refused = ChildProcess::run({hengshi, "calibrate", "--model", *model_dir_, "--data",
                                    source_path("data/demo_faq.jsonl"), "--target-precision", "0.95",
                                    "--traffic-log", bare, "--out", out});
  std::remove(bare.c_str());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("log.text: true"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

TEST_F(GatewayOperateTest, FlywheelExportsAgreedCloudAnswersAndTrainWaitsForTheReview) {
  start_middle_band_to_cloud();
  // The cloud answers three FAQ questions as the edge would (the shadow agrees: labelled rows),
  // one question the edge has no answer for (unlabelled), one twice (a duplicate), and one with
  // a phone number (never exported).
  std::map<std::string, std::string> faq_answers;  // question → the FAQ's answer
  for (const auto& row : read_jsonl(source_path("data/demo_faq.jsonl"))) {
    if (row.contains("answer")) faq_answers[row["text"].get<std::string>()] = row["answer"].get<std::string>();
  }
  const std::vector<std::pair<std::string, std::string>> agreed = {{"我要退款", faq_answers.at("我要退款")},
                                                                   {"运费多少", faq_answers.at("运费多少")},
                                                                   {"忘记密码了", faq_answers.at("忘记密码了")}};
  std::vector<std::string> prompts;
  for (const auto& [question, answer] : agreed) prompts.push_back(question + " [[sim:reply=" + answer + "]]");
  prompts.push_back(prompts[0]);
  prompts.push_back("今天天气怎么样 [[sim:reply=晴天]]");
  prompts.push_back("我的手机号是13812345678，订单到哪了");
  for (const auto& prompt : prompts) ASSERT_EQ(chat(user_message("auto", prompt)).status, 200);
  // A verdict for each answer whose question the edge could answer (not the weather, not PII).
  ASSERT_TRUE(wait_until([&] { return stats()["shadow"]["false_fallback"]["samples"] == 4.0; })) << stats().dump(2);
  ASSERT_TRUE(wait_until([&] { return request_lines().size() == prompts.size(); }));
  gateway_.reset();

  const std::string out = temp_path("flywheel.jsonl");
  const std::string hengshi = binary_path("src/cli/hengshi");
  auto exported = ChildProcess::run({hengshi, "flywheel", "export", "--log", log_path_, "--out", out,
                                     "--review-sample", "0.5"});
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto rows = read_jsonl(out);
  ASSERT_EQ(rows.size(), agreed.size()) << exported.output;
  for (const auto& row : rows) {
    EXPECT_TRUE(row["intent"].is_string()) << row.dump();
    EXPECT_EQ(row["text"].get<std::string>().find("13812345678"), std::string::npos);
  }
  EXPECT_EQ(rows[0]["intent"], "refund_request");
  EXPECT_EQ(read_jsonl(out + ".unlabelled.jsonl").size(), 1u) << "the weather question";
  auto review = read_jsonl(out + ".review.jsonl");
  ASSERT_EQ(review.size(), 2u) << "at least half of 3 rows";
  for (const auto& row : review) EXPECT_TRUE(row["verdict"].is_null());

  // An export whose review sample is not marked does not train.
  const std::string model = temp_path("flywheel-model");
  const std::vector<std::string> train = {hengshi, "train", "--data", source_path("data/demo_faq.jsonl"), "--data", out,
                                          "--out", model, "--search-budget", "0", "--no-oos-score"};
  auto refused = ChildProcess::run(train);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("without a verdict"), std::string::npos) << refused.output;

  // Marked (one row bad): it trains, and says how much of the sample was bad.
  review[0]["verdict"] = "ok";
  review[1]["verdict"] = "bad";
  {
    std::ofstream rewrite(out + ".review.jsonl", std::ios::trunc);
    for (const auto& row : review) rewrite << row.dump() << "\n";
  }
  auto trained = ChildProcess::run(train);
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("50.0% of the reviewed sample was bad"), std::string::npos) << trained.output;
  for (const char* suffix : {"", ".review.jsonl", ".unlabelled.jsonl"}) std::remove((out + suffix).c_str());
  std::filesystem::remove_all(model);
}

TEST_F(GatewayOperateTest, TheDashboardIsOneSelfContainedPageFromTheBinary) {
  start();
  auto page = admin_get("/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.header("content-type").find("text/html"), std::string::npos);
  EXPECT_NE(page.header("content-security-policy").find("default-src 'none'"), std::string::npos);
  EXPECT_NE(page.body.find("uPlot"), std::string::npos) << "the charting library is inlined";
  EXPECT_NE(page.body.find("/admin/stats"), std::string::npos);
  // No CDN, no external script or style: nothing on the page points off the admin listener.
  EXPECT_EQ(page.body.find("src=\"http"), std::string::npos);
  EXPECT_EQ(page.body.find("href=\"http"), std::string::npos);
  EXPECT_EQ(page.body.find("<script src"), std::string::npos);
  auto post = admin_post("/");
  EXPECT_EQ(post.status, 405);
}

TEST_F(GatewayOperateTest, APiiRequestNeverHasItsTextInTheLogEvenWithLogTextOn) {
  start_middle_band_to_cloud();
  auto reply = chat(user_message("auto", "我的手机号是13812345678，订单到哪了"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  ASSERT_TRUE(wait_until([&] { return request_lines().size() == 1; }));
  const json line = request_lines()[0];
  EXPECT_FALSE(line.contains("text")) << line.dump();
  std::ifstream in(log_path_);
  std::stringstream all;
  all << in.rdbuf();
  EXPECT_EQ(all.str().find("13812345678"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::testing
