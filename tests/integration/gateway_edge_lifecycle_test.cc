// The edge LLM's lifecycle in a running gateway: a LoRA adapter fine-tuned on a slice of the demo
// FAQ is promoted for task type faq while streamed requests run (none fails; the next requests
// answer from it), a candidate trained on shuffled answers and a corrupt copy are refused by the
// gate and the manifest (the serving version stays), rollback returns to the base by a pointer
// swap, `hengshi edge` drives it from the command line, every attempt is in the history file,
// /admin/edge, /readyz and the metrics, and a restarted gateway serves what was last promoted.
#include <gtest/gtest.h>

#ifdef HENGSHI_HAVE_LLAMA

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <set>
#include <thread>
#include <vector>

#include "finetune_fixture.h"
#include "gateway_fixture.h"
#include "support/child_process.h"
#include "support/shared_model.h"

namespace hengshi::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class GatewayEdgeLifecycleTest : public GatewayFixture {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(temp_path("edge-lifecycle"));
    fs::create_directories(*dir_);
    for (const json& row : write_demo_faq_slice(data(), 3, 2)) {
      if (row.contains("answer") && question_->empty()) *question_ = row["text"].get<std::string>();
    }
    write_shuffled_answers(data(), *dir_ + "/shuffled.jsonl");
    // The regression set: the FAQ rows and two out-of-scope questions (the gate's refusal text
    // comes from the config: the data teaches none).
    fs::copy_file(data(), gate_data());
    std::ofstream(gate_data(), std::ios::app) << R"({"text": "今天天气怎么样", "intent": "__oos__"})" << "\n"
                                              << R"({"text": "给我讲个笑话", "intent": "__oos__"})" << "\n";
    auto made = make_finetunable_test_model(*dir_ + "/base.gguf");
    std::string log = made.output;
    ok_ = made.exit_code == 0;
    // Same budget and seed for both: only the answers differ. Measured on the gate's rows: answer
    // F1 0.482 (the FAQ) against 0.323 (shuffled); tolerance 0.02.
    // Each test runs in a process of its own and would train the same models again: they are
    // trained once per build (by the bytes of this process's inputs) and copied in, since the
    // tests rewrite what they serve.
    auto train_once = [&](const std::string& name, const std::vector<std::string>& args, const std::string& out) {
      auto trained = shared_trained_model(name, args, FileArguments::content_only);
      log += trained.output;
      std::error_code ec;
      if (trained.ok) fs::copy(trained.dir, out, fs::copy_options::recursive, ec);
      return trained.ok && !ec;
    };
    ok_ = ok_ &&
          train_once("lifecycle-faq-adapter", lora_adapter_args(*dir_ + "/base.gguf", data(), 50), good()) &&
          train_once("lifecycle-shuffled-adapter",
                     lora_adapter_args(*dir_ + "/base.gguf", *dir_ + "/shuffled.jsonl", 50),
                     *dir_ + "/shuffled-adapter") &&
          // An intent model on the same rows: with one, the gate judges intent agreement against it.
          train_once("lifecycle-intent", {"train", "--data", data(), "--search-budget", "0"}, intent_model());
    if (ok_) {
      // A corrupt copy: the adapter's bytes no longer match its manifest.
      fs::copy(good(), *dir_ + "/corrupt-adapter", fs::copy_options::recursive);
      std::fstream file(*dir_ + "/corrupt-adapter/adapter.gguf", std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(-16, std::ios::end);
      file.write("XXXXXXXX", 8);
    }
    log_ = new std::string(log);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete log_;
  }
  static std::string data() { return *dir_ + "/faq.jsonl"; }
  static std::string good() { return *dir_ + "/faq-adapter"; }
  static std::string history() { return *dir_ + "/history.jsonl"; }
  static std::string gate_data() { return *dir_ + "/gate.jsonl"; }
  static std::string intent_model() { return *dir_ + "/intent"; }

  // `more`: extra edge.llm lines. The watch is off unless they set it: the rewrite at the end
  // of the promotion test must meet a restart, not a watch.
  // `edge`: extra lines of the edge section (the intent model).
  void start_gateway(const std::string& history_path = history(),
                     const std::string& more = "    watch_interval_ms: 0\n", const std::string& edge = "") {
    ASSERT_TRUE(ok_) << *log_;
    GatewayOptions options;
    // Two workers: streamed requests keep one busy while the gate runs on its own engines.
    options.extra_yaml = "edge:\n" + edge + "  llm:\n    model_path: " + *dir_ + "/base.gguf\n    threads: 1\n" +
                         "    max_tokens: 48\n    context_tokens: 256\n    workers: 2\n" +
                         "    history: " + history_path + "\n    gate: {data: " + gate_data() +
                         ", speed_tolerance: 0.9, refusal: 抱歉，这个问题我无法回答。}\n" + more;
    start(options);
  }
  json ask_faq() {
    json request = json::parse(user_message("edge-llm", *question_));
    request["hengshi"] = {{"task_type", "faq"}};
    auto reply = chat(request.dump());
    EXPECT_EQ(reply.status, 200) << reply.body;
    return reply.json();
  }
  HttpResult change(const std::string& path, const json& body) {
    return http_call(gateway_->host(), gateway_->admin_port(),
                     {"POST", path, body.dump(), "application/json", {}}, std::chrono::seconds(120));
  }
  static json manifest(const std::string& dir) { return json::parse(std::ifstream(dir + "/manifest.json")); }
  static std::vector<json> history_lines(const std::string& path = history()) {
    std::vector<json> lines;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    return lines;
  }

  static std::string* dir_;
  static std::string* log_;
  static bool ok_;
  static inline std::string* question_ = new std::string();
};
std::string* GatewayEdgeLifecycleTest::dir_ = nullptr;
std::string* GatewayEdgeLifecycleTest::log_ = nullptr;
bool GatewayEdgeLifecycleTest::ok_ = false;

TEST_F(GatewayEdgeLifecycleTest, PromoteWhileStreamingRefuseWorseAndCorruptRollBackAndRestart) {
  start_gateway();
  const std::string version = manifest(good())["model_version"];
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf");
  json status = admin_get("/admin/edge").json();
  EXPECT_EQ(status["serving"], "base.gguf");
  EXPECT_EQ(status["source"], "config");
  EXPECT_TRUE(status["last_promotion"].is_null());

  // Streamed faq requests run while the adapter is promoted; a bounded number, each one checked.
  std::atomic<bool> promoted{false};
  std::atomic<int> failures{0}, streams{0}, after_promotion{0};
  std::string first_failure;
  std::set<std::string> answered_by;  // edge_model of each stream's final event
  std::thread client([&] {
    json request = json::parse(user_message("edge-llm", *question_, true));
    request["hengshi"] = {{"task_type", "faq"}};
    for (int i = 0; i < 200 && after_promotion < 3; ++i) {
      const bool was_promoted = promoted;
      auto reply = chat(request.dump());
      const auto data = reply.sse_data();
      const bool complete = reply.status == 200 && !data.empty() && data.back() == "[DONE]" &&
                            reply.body.find("\"error\"") == std::string::npos;
      if (!complete && failures++ == 0) first_failure = std::to_string(reply.status) + " " + reply.body;
      for (const json& event : reply.sse_events()) {
        if (event.is_object() && event.contains("hengshi")) answered_by.insert(event["hengshi"].value("edge_model", ""));
      }
      ++streams;
      if (was_promoted) ++after_promotion;
    }
  });
  auto promotion = change("/admin/edge/promote", {{"dir", good()}, {"task", "faq"}, {"by", "test"}});
  promoted = true;
  client.join();
  ASSERT_EQ(promotion.status, 200) << promotion.body;
  EXPECT_EQ(failures, 0) << first_failure;
  EXPECT_GE(streams, 4);
  // Streams answered by the base until the swap and by the adapter after it.
  EXPECT_TRUE(answered_by.contains("base.gguf")) << streams;
  EXPECT_TRUE(answered_by.contains("base.gguf+faq@" + version)) << streams;
  const json entry = promotion.json()["entry"];
  EXPECT_EQ(entry["result"], "promoted");
  EXPECT_EQ(entry["by"], "test");
  EXPECT_TRUE(entry["gate"]["passed"].get<bool>()) << entry.dump();
  EXPECT_GT(entry["gate"]["candidate"]["f1"].get<double>(), entry["gate"]["baseline"]["f1"].get<double>())
      << entry.dump();
  // Three intents: agreement is measured; two out-of-scope rows are asked for the refusal.
  EXPECT_EQ(entry["gate"]["oos_rows"], 2);
  EXPECT_TRUE(entry["gate"]["candidate"]["intent_agreement"].is_number()) << entry.dump();
  EXPECT_TRUE(entry["gate"]["candidate"]["refusal_rate"].is_number()) << entry.dump();
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + version);

  // Worse and corrupt candidates are refused; the adapter keeps serving.
  auto worse = change("/admin/edge/promote", {{"dir", *dir_ + "/shuffled-adapter"}, {"task", "faq"}});
  EXPECT_EQ(worse.status, 422) << worse.body;
  EXPECT_EQ(worse.json()["error"]["code"], "gate_failed") << worse.body;
  EXPECT_FALSE(worse.json()["entry"]["gate"]["passed"].get<bool>());
  auto corrupt = change("/admin/edge/promote", {{"dir", *dir_ + "/corrupt-adapter"}, {"task", "faq"}});
  EXPECT_EQ(corrupt.status, 422) << corrupt.body;
  EXPECT_EQ(corrupt.json()["error"]["code"], "model_invalid") << corrupt.body;
  EXPECT_NE(corrupt.body.find("adapter.gguf"), std::string::npos) << corrupt.body;
  auto bad = change("/admin/edge/promote", {{"task", "faq"}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + version);
  EXPECT_EQ(get("/readyz").json()["edge_llm"]["adapters"]["faq"], version);

  // Rollback from the command line: the base answers again, by a swap of the version kept loaded.
  auto rolled = ChildProcess::run({binary_path("src/cli/hengshi"), "edge", "rollback", "--admin",
                                   "127.0.0.1:" + std::to_string(gateway_->admin_port()), "--by", "cli"},
                                  std::chrono::seconds(60));
  ASSERT_EQ(rolled.exit_code, 0) << rolled.output;
  EXPECT_NE(rolled.stdout_text.find("serving now:    base.gguf"), std::string::npos) << rolled.output;
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf");
  status = admin_get("/admin/edge").json();
  EXPECT_EQ(status["last_rollback"]["load_ms"], 0.0) << status.dump();  // no load: a pointer swap
  EXPECT_LT(status["last_rollback"]["swap_ms"].get<double>(), 1000.0);
  EXPECT_EQ(status["last_promotion"]["to"]["adapters"]["faq"]["version"], version);
  auto again = change("/admin/edge/rollback", json::object());
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.json()["error"]["code"], "no_previous_version");

  // Every attempt the lifecycle decided is in the history, with who, when and the gate (the
  // request without a dir was refused by the admin listener before it got there).
  const auto lines = history_lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["result"], "promoted");
  EXPECT_EQ(lines[1]["result"], "refused");
  EXPECT_TRUE(lines[1].contains("gate"));
  EXPECT_EQ(lines[2]["result"], "refused");
  EXPECT_FALSE(lines[2].contains("gate"));  // the manifest check came first
  EXPECT_EQ(lines[3]["result"], "rolled_back");
  EXPECT_EQ(lines[3]["by"], "cli");
  for (const auto& line : lines) EXPECT_EQ(line["schema"], 1);

  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find("hengshi_edge_llm_changes_total{action=\"promote\",result=\"promoted\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("hengshi_edge_llm_changes_total{action=\"promote\",result=\"refused\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("hengshi_edge_llm_model_info{model=\"base.gguf\",adapter=\"faq\",version=\"" + version + "\"} 0"),
            std::string::npos);

  // Promote again from the command line, then restart: the gateway serves what was promoted.
  auto cli_promote = ChildProcess::run({binary_path("src/cli/hengshi"), "edge", "promote", good(), "--task", "faq",
                                        "--admin", "127.0.0.1:" + std::to_string(gateway_->admin_port())},
                                       std::chrono::seconds(120));
  ASSERT_EQ(cli_promote.exit_code, 0) << cli_promote.output;
  EXPECT_NE(cli_promote.stdout_text.find("candidate"), std::string::npos) << cli_promote.output;
  gateway_.reset();
  gateway_ = std::make_unique<ChildProcess>(
      ChildProcess::start({binary_path("src/cli/hengshi"), "serve", "--config", config_path_}));
  status = admin_get("/admin/edge").json();
  EXPECT_EQ(status["source"], "history") << status.dump();
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + version);

  // The promoted directory rewritten in place (another version in its manifest): a restart must
  // not serve it ungated — the config's state serves, and the reason is shown.
  json rewritten = manifest(good());
  rewritten["model_version"] = "20270101T000000Z-00000000";
  std::ofstream(good() + "/manifest.json") << rewritten.dump(2);
  gateway_.reset();
  gateway_ = std::make_unique<ChildProcess>(
      ChildProcess::start({binary_path("src/cli/hengshi"), "serve", "--config", config_path_}));
  status = admin_get("/admin/edge").json();
  EXPECT_NE(status["source"].get<std::string>().find("not the promoted " + version), std::string::npos)
      << status.dump();
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf");

  // A rollback with nothing kept loaded (a restarted gateway; edge.llm.keep_previous: false
  // always) loads its target: the base, under the promotion the history ends with.
  auto loaded_back = change("/admin/edge/rollback", {{"by", "test"}});
  ASSERT_EQ(loaded_back.status, 200) << loaded_back.body;
  EXPECT_GT(loaded_back.json()["entry"]["load_ms"].get<double>(), 0.0) << loaded_back.body;
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf");
}

// A serving adapter directory rewritten in place (as `hengshi finetune --out DIR` or a deploy does)
// is seen by the watch, gated against the version that serves (its files are gone, so the gate
// uses the serving engine; intent agreement judged against the gateway's intent engine) and
// swapped in; a corrupt rewrite is refused and the version that
// serves stays. Both are history lines by "watch".
TEST_F(GatewayEdgeLifecycleTest, TheWatchGatesAndSwapsInARewrittenAdapterDirectory) {
  const std::string watched = *dir_ + "/watched-faq";
  const std::string watch_history = *dir_ + "/watch-history.jsonl";
  fs::remove_all(watched);
  fs::remove(watch_history);
  fs::copy(*dir_ + "/shuffled-adapter", watched, fs::copy_options::recursive);
  const std::string first = manifest(watched)["model_version"];
  start_gateway(watch_history, "    watch_interval_ms: 100\n    adapters: {faq: " + watched + "}\n",
                "  intent_model: " + intent_model() + "\n");
  json status = admin_get("/admin/edge").json();
  EXPECT_EQ(status["watch"]["interval_ms"], 100) << status.dump();
  EXPECT_EQ(status["adapters"]["faq"], first);
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + first);

  // The better adapter written over it: the file, then its manifest.
  fs::copy_file(good() + "/adapter.gguf", watched + "/adapter.gguf", fs::copy_options::overwrite_existing);
  fs::copy_file(good() + "/manifest.json", watched + "/manifest.json", fs::copy_options::overwrite_existing);
  const std::string second = manifest(watched)["model_version"];
  ASSERT_NE(second, first);
  // A line is appended whole, but a read may meet it half-written: that read does not count.
  auto history_has = [&](std::size_t lines) {
    try {
      return history_lines(watch_history).size() >= lines;
    } catch (const std::exception&) {
      return false;
    }
  };
  ASSERT_TRUE(wait_until([&] { return history_has(1); }, std::chrono::seconds(120)))
      << "the watch never acted on " << watched << "\n" << gateway_->output();
  json line = history_lines(watch_history).back();
  EXPECT_EQ(line["by"], "watch");
  EXPECT_EQ(line["result"], "promoted") << line.dump();
  EXPECT_TRUE(line["gate"]["passed"].get<bool>()) << line.dump();
  EXPECT_NE(line["gate"].value("baseline_engine", "").find("serving"), std::string::npos) << line.dump();
  // The gateway's intent engine is the gate's intent reference.
  EXPECT_EQ(line["gate"]["intent_reference"],
            "intent model " + manifest(intent_model())["model_version"].get<std::string>())
      << line.dump();
  EXPECT_TRUE(line["gate"]["candidate"]["intent_agreement"].is_number()) << line.dump();
  EXPECT_EQ(admin_get("/admin/edge").json()["adapters"]["faq"], second);
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + second);

  // A corrupt new version (its bytes do not match its manifest): refused, once; the version that
  // serves stays.
  fs::copy_file(*dir_ + "/corrupt-adapter/adapter.gguf", watched + "/adapter.gguf",
                fs::copy_options::overwrite_existing);
  json corrupt = manifest(watched);
  corrupt["model_version"] = "20270102T000000Z-deadbeef";
  std::ofstream(watched + "/manifest.json", std::ios::trunc) << corrupt.dump(2);
  ASSERT_TRUE(wait_until([&] { return history_has(2); }, std::chrono::seconds(60)));
  line = history_lines(watch_history).back();
  EXPECT_EQ(line["by"], "watch");
  EXPECT_EQ(line["result"], "refused") << line.dump();
  EXPECT_NE(line["error"].get<std::string>().find("adapter.gguf"), std::string::npos) << line.dump();
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + second);
  // Not retried while the directory stays as it is (the history ends with the rollback below).
  auto rolled = change("/admin/edge/rollback", {{"by", "test"}});
  EXPECT_EQ(rolled.status, 200) << rolled.body;
  EXPECT_EQ(ask_faq()["hengshi"]["edge_model"], "base.gguf+faq@" + first);
  // The version back in service is gone from its directory: the rollback says a restart cannot
  // load it.
  EXPECT_NE(rolled.json().value("warning", "").find("a restart cannot load it"), std::string::npos) << rolled.body;
  EXPECT_NE(rolled.json().value("warning", "").find(watched + " now holds 20270102T000000Z-deadbeef"),
            std::string::npos)
      << rolled.body;
  const auto lines = history_lines(watch_history);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["action"], "rollback");
}

}  // namespace
}  // namespace hengshi::testing

#endif  // HENGSHI_HAVE_LLAMA
