// The operator's tools end to end: `hengshi train` → `hengshi calibrate` → `hengshi route`, the
// real binaries on the shipped demo FAQ. route must give one decision per input line, using the
// thresholds calibrate wrote, and keep going past bad lines.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/child_process.h"
#include "support/http_client.h"
#include "support/shared_model.h"

namespace hengshi::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CliRouteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(temp_path("cli-route"));
    fs::create_directories(*dir_);
    const std::string hengshi = binary_path("src/cli/hengshi");
    SharedModel trained = shared_demo_intent_model();  // trained once per build, read-only here
    model_ = new std::string(trained.dir);
    log_ = new std::string(trained.output);
    if (!trained.ok) return;
    auto calibrated = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                         source_path("data/demo_faq.jsonl"), "--target-precision", "0.95",
                                         "--out", *dir_ + "/thresholds.json"});
    *log_ += calibrated.output;
    // Piped, the progress counter stays quiet: no carriage returns in what a log or jq reads.
    ok_ = calibrated.exit_code == 0 && calibrated.output.find('\r') == std::string::npos;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete model_;
    delete log_;
  }
  void SetUp() override { ASSERT_TRUE(ok_) << *log_; }

  // Runs `hengshi route` over `lines`; returns the decisions, one per non-blank line.
  std::vector<json> route(const std::vector<std::string>& lines) {
    const std::string config = *dir_ + "/route.yaml";
    std::ofstream(config) << "edge:\n  intent_model: " << *model_ << "\nrouting:\n  thresholds_file: " << *dir_
                          << "/thresholds.json\n";
    const std::string input = *dir_ + "/requests.jsonl";
    std::ofstream out(input);
    for (const auto& line : lines) out << line << "\n";
    out.close();
    auto finished = ChildProcess::run({binary_path("src/cli/hengshi"), "route", "--config", config},
                                      std::chrono::seconds(60), input);
    EXPECT_EQ(finished.exit_code, 0) << finished.output;
    std::vector<json> decisions;
    std::istringstream text(finished.stdout_text);
    std::string line;
    while (std::getline(text, line)) decisions.push_back(json::parse(line));
    return decisions;
  }

  static std::string* dir_;
  static std::string* model_;
  static std::string* log_;
  static bool ok_;
};
std::string* CliRouteTest::dir_ = nullptr;
std::string* CliRouteTest::model_ = nullptr;
std::string* CliRouteTest::log_ = nullptr;
bool CliRouteTest::ok_ = false;

TEST_F(CliRouteTest, CalibratePrintsTheFitTableAndWritesAVersionedFile) {
  EXPECT_NE(log_->find("pass"), std::string::npos) << *log_;
  json file = json::parse(std::ifstream(*dir_ + "/thresholds.json"));
  EXPECT_EQ(file["format"], "hengshi-thresholds");
  EXPECT_EQ(file["target_precision"], 0.95);
  EXPECT_FALSE(file["version"].get<std::string>().empty());
  EXPECT_FALSE(file["model_version"].get<std::string>().empty());
}

TEST_F(CliRouteTest, CalibratePrintsRulesFinalPolicyAndPriorShift) {
  // The suite's own run: hierarchical by default, with the policy's figures and the shift table.
  EXPECT_NE(log_->find("rule hierarchical"), std::string::npos) << *log_;
  EXPECT_NE(log_->find("final policy on the calibration rows"), std::string::npos) << *log_;
  EXPECT_NE(log_->find("prior shift"), std::string::npos) << *log_;
  json file = json::parse(std::ifstream(*dir_ + "/thresholds.json"));
  EXPECT_TRUE(file["notes"].contains("oos_share")) << file.dump();
  EXPECT_NE(file["notes"]["calibration"].get<std::string>().find("rule hierarchical"),
            std::string::npos);

  const std::string hengshi = binary_path("src/cli/hengshi");
  const std::vector<std::string> base = {hengshi, "calibrate", "--model", *model_,
                                         "--data", source_path("data/demo_faq.jsonl"),
                                         "--target-precision", "0.95"};
  auto with = [&](std::vector<std::string> extra, const std::string& out) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--out", *dir_ + "/" + out});
    return ChildProcess::run(args);
  };
  auto shifted = with({"--oos-share", "0.3"}, "shifted.json");
  ASSERT_EQ(shifted.exit_code, 0) << shifted.output;
  json shifted_file = json::parse(std::ifstream(*dir_ + "/shifted.json"));
  EXPECT_EQ(shifted_file["notes"]["oos_share"], "0.300") << shifted_file.dump();
  EXPECT_NE(shifted.stdout_text.find("out-of-scope share 0.300"), std::string::npos)
      << shifted.stdout_text;

  auto legacy = with({"--rule", "per-group"}, "legacy.json");
  ASSERT_EQ(legacy.exit_code, 0) << legacy.output;
  EXPECT_NE(legacy.stdout_text.find("rule per_group_legacy"), std::string::npos)
      << legacy.stdout_text;

  auto bad_rule = with({"--rule", "loose"}, "bad.json");
  EXPECT_EQ(bad_rule.exit_code, 2) << bad_rule.output;
  EXPECT_NE(bad_rule.output.find("--rule"), std::string::npos) << bad_rule.output;
  auto bad_share = with({"--oos-share", "1.5"}, "bad.json");
  EXPECT_EQ(bad_share.exit_code, 2) << bad_share.output;
  EXPECT_NE(bad_share.output.find("--oos-share must be in [0, 1)"), std::string::npos)
      << bad_share.output;

  // Data without out-of-scope rows cannot be reweighted to another share: a clear refusal.
  const std::string in_scope = *dir_ + "/in_scope.jsonl";
  {
    std::ifstream all(source_path("data/demo_faq.jsonl"));
    std::ofstream out(in_scope);
    std::string line;
    while (std::getline(all, line)) {
      if (line.find("__oos__") == std::string::npos) out << line << "\n";
    }
  }
  // Data without out-of-scope rows: the model's stand-ins from held-out intents take their place.
  auto stand_ins = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                      in_scope, "--target-precision", "0.95", "--oos-share", "0.2",
                                      "--out", *dir_ + "/stand-ins.json"});
  EXPECT_EQ(stand_ins.exit_code, 0) << stand_ins.output;
  EXPECT_NE(stand_ins.output.find("stand-in rows from the model's held-out intents"),
            std::string::npos)
      << stand_ins.output;
  EXPECT_NE(stand_ins.output.find("prior shift"), std::string::npos) << stand_ins.output;
  // No out-of-scope question may get an edge answer: the bands rise until none does.
  auto no_leak = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                    in_scope, "--target-precision", "0.95", "--oos-share", "0.2",
                                    "--max-oos-leak", "0", "--out", *dir_ + "/no-leak.json"});
  EXPECT_EQ(no_leak.exit_code, 0) << no_leak.output;
  EXPECT_NE(no_leak.output.find("out-of-scope leak 0.000"), std::string::npos) << no_leak.output;
  auto bad_leak = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                     in_scope, "--target-precision", "0.95", "--oos-share", "0.2",
                                     "--max-oos-leak", "1.5",
                                     "--out", *dir_ + "/bad-leak.json"});
  EXPECT_EQ(bad_leak.exit_code, 2) << bad_leak.output;
  EXPECT_NE(bad_leak.output.find("leak must be in [0, 1]"), std::string::npos) << bad_leak.output;
  auto refused = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                    in_scope, "--target-precision", "0.95", "--oos-share", "0.2",
                                    "--no-synthetic-oos", "--out", *dir_ + "/refused.json"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("needs out-of-scope rows"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(*dir_ + "/refused.json"));
}

// --cross-fit K retrains the model's recipe K times on its own training data (which the manifest
// names and hashes) and fits on those rows out of fold as well; the fold models are removed.
TEST_F(CliRouteTest, CalibrateCrossFitsOnTheModelsOwnTrainingRows) {
  const std::string hengshi = binary_path("src/cli/hengshi");
  const std::string work = *dir_ + "/cross-fit";
  fs::create_directories(work);
  auto crossed = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                    source_path("data/demo_faq.jsonl"), "--target-precision", "0.95",
                                    "--cross-fit", "3", "--out", work + "/thresholds.json", "--predictions",
                                    work + "/evidence.jsonl"},
                                   std::chrono::seconds(300));
  ASSERT_EQ(crossed.exit_code, 0) << crossed.output;
  EXPECT_NE(crossed.output.find("out of fold: the model's training rows"), std::string::npos) << crossed.output;
  EXPECT_NE(crossed.output.find("predicted out of fold by 3 fold models"), std::string::npos) << crossed.output;
  EXPECT_TRUE(fs::exists(work + "/thresholds.json"));
  for (const auto& entry : fs::directory_iterator(work)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "thresholds.json" || name == "evidence.jsonl") << "left behind: " << entry.path();
  }
  // --predictions: every row the bands rest on, each saying where it came from. The held-out rows
  // come first, in the data file's order; the out-of-fold rows are the model's training rows.
  std::map<std::string, std::size_t> by_source;
  std::ifstream evidence(work + "/evidence.jsonl");
  std::ifstream held_out(source_path("data/demo_faq.jsonl"));
  std::string line;
  std::string data_line;
  while (std::getline(evidence, line)) {
    const json row = json::parse(line);
    const std::string source = row.at("source").get<std::string>();
    ++by_source[source];
    EXPECT_TRUE(source == "held_out" || source == "out_of_fold") << line;
    EXPECT_GE(row.at("confidence").get<double>(), 0.0) << line;
    EXPECT_LE(row.at("confidence").get<double>(), 1.0) << line;
    EXPECT_FALSE(row.at("predicted").get<std::string>().empty()) << line;
    if (source == "held_out") {
      while (std::getline(held_out, data_line) && data_line.find_first_not_of(" \t\r") == std::string::npos) {
      }
      const json data = json::parse(data_line);
      EXPECT_EQ(row.at("text"), data.at("text")) << line;
      EXPECT_EQ(row.at("intent"), data.at("intent")) << line;
    }
  }
  EXPECT_GT(by_source["held_out"], 0u);
  EXPECT_GT(by_source["out_of_fold"], 0u);
  EXPECT_NE(crossed.output.find(std::to_string(by_source["out_of_fold"]) + " rows of"), std::string::npos)
      << crossed.output;
  auto refused = ChildProcess::run({hengshi, "calibrate", "--model", *model_, "--data",
                                    source_path("data/demo_faq.jsonl"), "--target-precision", "0.95",
                                    "--cross-fit", "1", "--out", work + "/refused.json"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("folds must be in [2, 20]"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(work + "/refused.json"));
}

TEST_F(CliRouteTest, OneDecisionPerLineWithRouteReasonIntentAndConfidence) {
  auto decisions = route({
      R"({"text": "我的订单到哪了"})",
      R"({"text": "我的手机号是13912345678"})",
      R"({"text": "我要投诉"})",
      R"({"text": "write a sort function", "task_type": "code"})",
      R"({"model": "auto", "messages": [{"role": "user", "content": "今天天气怎么样"}]})",
      R"(not json)",
      R"({"text": "hello", "deadline_ms": "soon"})",
  });
  ASSERT_EQ(decisions.size(), 7u);
  EXPECT_EQ(decisions[0]["route"], "edge");
  EXPECT_EQ(decisions[0]["reason"], "high_confidence");
  EXPECT_EQ(decisions[0]["intent"], "order_status");
  EXPECT_GT(decisions[0]["confidence"].get<double>(), 0.0);
  EXPECT_EQ(decisions[1]["reason"], "pii_pin");
  EXPECT_NE(decisions[1]["route"], "cloud-small");
  EXPECT_NE(decisions[1]["route"], "cloud-large");
  EXPECT_EQ(decisions[2]["route"], "human");
  EXPECT_EQ(decisions[2]["reason"], "sensitive_signal");
  EXPECT_EQ(decisions[3]["reason"], "capability_miss");
  EXPECT_EQ(decisions[4]["intent"], "__oos__");
  EXPECT_EQ(decisions[4]["reason"], "out_of_scope");
  EXPECT_EQ(decisions[4]["fallback_type"], "quality");
  EXPECT_EQ(decisions[5]["error"]["code"], "invalid_json");
  EXPECT_EQ(decisions[5]["line"], 6);
  EXPECT_EQ(decisions[6]["error"]["param"], "deadline_ms");
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(decisions[i].contains("fallback_type")) << i;
    EXPECT_NE(decisions[i]["figures"]["policy"].get<std::string>().find("thr-"), std::string::npos)
        << "route must use the calibrated thresholds: " << decisions[i].dump();
  }
}

// Every line a command writes on stdout is data a pipe to jq must parse: logs (a complexity
// model's load line, serve's ready line, warnings) go to stderr.
TEST_F(CliRouteTest, CommandsThatWriteDataOnStdoutKeepTheirLogsOnStderr) {
  const std::string hengshi = binary_path("src/cli/hengshi");
  const std::string rows = *dir_ + "/complexity.jsonl";
  {
    std::ofstream out(rows);
    for (int i = 0; i < 30; ++i) {
      out << json{{"text", "Prove that " + std::to_string(i + 2) + "x^2 - 3x + 1 has two real roots. Which is NOT true?"},
                  {"small_correct", false}}
                 .dump()
          << "\n"
          << json{{"text", "where is my parcel " + std::to_string(i)}, {"small_correct", true}}.dump() << "\n";
    }
  }
  auto trained = ChildProcess::run({hengshi, "train-complexity", "--data", rows, "--out", *dir_ + "/complexity"});
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string config = *dir_ + "/route-complexity.yaml";
  std::ofstream(config) << "edge:\n  intent_model: " << *model_ << "\nrouting:\n  complexity_model: " << *dir_
                        << "/complexity\n";
  const std::string input = *dir_ + "/complexity-requests.jsonl";
  std::ofstream(input) << R"({"text": "我的订单到哪了"})" << "\n" << R"({"text": "Prove that 9x^2 has a root"})" << "\n";
  auto routed = ChildProcess::run({hengshi, "route", "--config", config}, std::chrono::seconds(60), input);
  ASSERT_EQ(routed.exit_code, 0) << routed.output;
  auto json_lines = [](const std::string& text) {
    std::istringstream lines(text);
    std::string line;
    int parsed = 0;
    while (std::getline(lines, line)) {
      EXPECT_TRUE(json::accept(line)) << "not JSON on stdout: " << line;
      ++parsed;
    }
    return parsed;
  };
  EXPECT_EQ(json_lines(routed.stdout_text), 2) << routed.output;
  EXPECT_NE(routed.output.find("--- stderr ---"), std::string::npos);

  // serve: its request log goes to stdout by default; the ready line and the logs do not.
  const std::string serve_config = *dir_ + "/serve.yaml";
  std::ofstream(serve_config) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n"
                              << "edge:\n  intent_model: " << *model_ << "\n"
                              << "pools:\n  cloud-small: {members: [{name: nowhere, base_url: "
                                 "\"http://127.0.0.1:1/v1\", model: m}]}\n";
  auto gateway = ChildProcess::start({hengshi, "serve", "--config", serve_config});
  HttpRequest request;
  request.method = "POST";
  request.target = "/v1/chat/completions";
  request.body = R"({"model": "edge", "messages": [{"role": "user", "content": "我的订单到哪了"}]})";
  for (int i = 0; i < 2; ++i) EXPECT_EQ(http_call(gateway.host(), gateway.port(), request).status, 200);
  gateway.signal(SIGTERM);
  ASSERT_EQ(gateway.wait(std::chrono::seconds(10)), 0) << gateway.output();
  EXPECT_EQ(json_lines(gateway.stdout_text()), 2) << gateway.output();
}

TEST_F(CliRouteTest, SessionsSmoothComplexityAcrossLines) {
  const std::string complex =
      R"({"session_id": "s1", "text": "Compare plan A and plan B, explain the trade-offs step by step, analyze why, and give a table in JSON format. Why? How?"})";
  auto decisions = route({complex, complex, R"({"session_id": "s1", "text": "ok thanks"})",
                          R"({"session_id": "s2", "text": "ok thanks"})"});
  ASSERT_EQ(decisions.size(), 4u);
  EXPECT_EQ(decisions[0]["route"], "cloud-large");
  EXPECT_EQ(decisions[2]["route"], "cloud-large");
  EXPECT_EQ(decisions[2]["reason"], "session_sticky");
  EXPECT_NE(decisions[3]["reason"], "session_sticky");  // another session starts fresh
}

TEST_F(CliRouteTest, RefusesAMalformedThresholdsFile) {
  std::ofstream(*dir_ + "/broken.json") << R"({"format": "hengshi-thresholds", "format_version": 1, "version": "x", "model_version": "m", "target_precision": 0.97, "default_band": {"high": 0.2, "low": 0.9}, "task_types": {}, "intents": {}, "task_intents": {}, "notes": {}})";
  const std::string config = *dir_ + "/broken.yaml";
  std::ofstream(config) << "routing:\n  thresholds_file: " << *dir_ << "/broken.json\n";
  auto finished = ChildProcess::run({binary_path("src/cli/hengshi"), "route", "--config", config});
  EXPECT_EQ(finished.exit_code, 2) << finished.output;
  EXPECT_NE(finished.output.find("broken.json"), std::string::npos) << finished.output;
  EXPECT_NE(finished.output.find("default_band"), std::string::npos) << finished.output;
}

}  // namespace
}  // namespace hengshi::testing
