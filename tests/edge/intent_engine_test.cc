#include "edge/intent_engine.h"

#include <gtest/gtest.h>

#include "support/child_process.h"
#include "support/shared_model.h"
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "edge/intent_embedder.h"
#include "edge/intent_trainer.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;


// One model trained on the small fixture, once per build for every test process
// (support/shared_model.h; it is read-only): each test that tampers with a model works on its
// own copy.
class IntentEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new fs::path(fs::temp_directory_path() /
                         ("hengshi-intent-engine-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::random_device{}())));
    fs::create_directories(*work_);
    const auto shared = testing::shared_small_intent_model();
    ASSERT_TRUE(shared.ok) << shared.output;
    model_dir_ = new fs::path(shared.dir);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*work_, ec);
    delete work_;
    work_ = nullptr;
    delete model_dir_;
    model_dir_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(model_dir_, nullptr) << "the suite's model failed to train"; }

  static fs::path model_dir() { return *model_dir_; }

  static fs::path copy_model(const std::string& name) {
    const fs::path copy = *work_ / name;
    fs::remove_all(copy);
    fs::copy(model_dir(), copy, fs::copy_options::recursive);
    return copy;
  }

  static nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  static void write_json(const fs::path& path, const nlohmann::json& json) {
    std::ofstream(path, std::ios::trunc) << json.dump(2);
  }

  static void expect_refused(const fs::path& dir, const std::vector<std::string>& fragments) {
    auto engine = IntentEngine::load(dir);
    ASSERT_FALSE(engine) << "load unexpectedly succeeded";
    EXPECT_EQ(engine.error().code, "model_invalid");
    for (const std::string& fragment : fragments) {
      EXPECT_NE(engine.error().message.find(fragment), std::string::npos)
          << "\"" << fragment << "\" not in: " << engine.error().message;
    }
  }

  static std::unique_ptr<IntentEngine> load() {
    auto engine = IntentEngine::load(model_dir());
    EXPECT_TRUE(engine) << engine.error().message;
    return engine ? std::move(engine.value()) : nullptr;
  }

  static fs::path* work_;
  static fs::path* model_dir_;
};

fs::path* IntentEngineTest::work_ = nullptr;
fs::path* IntentEngineTest::model_dir_ = nullptr;

TEST_F(IntentEngineTest, PredictsIntentAnswerConfidenceAndMargin) {
  auto engine = load();
  ASSERT_TRUE(engine);
  const IntentPrediction prediction = engine->predict("where is my order");
  EXPECT_EQ(prediction.intent, "order_status");
  EXPECT_FALSE(prediction.is_oos);
  EXPECT_EQ(prediction.answer, "Check My Orders for the status. 请在「我的订单」查看。");
  EXPECT_GT(prediction.confidence, 0.0);
  EXPECT_LE(prediction.confidence, 1.0);
  EXPECT_GT(prediction.raw_probability, 0.0);
  EXPECT_LE(prediction.raw_probability, 1.0);
  EXPECT_GE(prediction.margin, 0.0);
  // The margin is on the intent-confidence scale; confidence folds in P(in scope) on top.
  EXPECT_LE(prediction.margin, prediction.intent_confidence);
  EXPECT_LE(prediction.confidence, prediction.intent_confidence);
  EXPECT_GT(prediction.in_scope, 0.5);
  EXPECT_FALSE(prediction.second_intent.empty());
  EXPECT_NE(prediction.second_intent, prediction.intent);
  EXPECT_TRUE(answerable(prediction, 0.0));
  EXPECT_FALSE(answerable(prediction, 1.01));
}

TEST_F(IntentEngineTest, NormalisesInputLikeTraining) {
  auto engine = load();
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->predict("ＷＨＥＲＥ　ＩＳ　ＭＹ　ＯＲＤＥＲ？").intent, "order_status");
  EXPECT_EQ(engine->predict("  我要退款！！ ").intent, "refund");
}

TEST_F(IntentEngineTest, OutOfScopeIsNeverAnswerable) {
  auto engine = load();
  ASSERT_TRUE(engine);
  const IntentPrediction joke = engine->predict("tell me a joke");
  EXPECT_EQ(joke.intent, "__oos__");
  EXPECT_TRUE(joke.is_oos);
  EXPECT_TRUE(joke.answer.empty());
  EXPECT_FALSE(answerable(joke, 0.0));

  for (const char* nothing : {"", "   ", "?!。"}) {
    const IntentPrediction empty = engine->predict(nothing);
    EXPECT_TRUE(empty.is_oos) << nothing;
    EXPECT_EQ(empty.intent, "__oos__");
    EXPECT_EQ(empty.confidence, 0.0);
    EXPECT_FALSE(answerable(empty, 0.0));
  }
}

TEST_F(IntentEngineTest, ExposesVersionAndLabels) {
  auto engine = load();
  ASSERT_TRUE(engine);
  EXPECT_FALSE(engine->model_version().empty());
  EXPECT_EQ(engine->model_version(), engine->manifest().model_version);
  EXPECT_EQ(engine->labels().size(), 5u);
  EXPECT_EQ(engine->normalizer().settings().segmentation, NormalizerSettings{}.segmentation);
}

TEST_F(IntentEngineTest, ConcurrentPredictionsAgreeWithSequentialOnes) {
  auto engine = load();
  ASSERT_TRUE(engine);
  const std::vector<std::string> texts = {"where is my order", "我要退款",
                                          "reset my password", "几点关门",
                                          "tell me a joke",    "我的包裹在哪里"};
  std::vector<IntentPrediction> expected;
  for (const std::string& text : texts) expected.push_back(engine->predict(text));

  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 300; ++round) {
        const std::size_t i = static_cast<std::size_t>(round + t) % texts.size();
        const IntentPrediction got = engine->predict(texts[i]);
        if (got.intent != expected[i].intent || got.confidence != expected[i].confidence) {
          ++mismatches[static_cast<std::size_t>(t)];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST_F(IntentEngineTest, RefusesMissingManifest) {
  const fs::path dir = copy_model("no-manifest");
  fs::remove(dir / "manifest.json");
  expect_refused(dir, {"manifest.json", "missing"});
  expect_refused(*work_ / "does-not-exist", {"manifest.json"});
}

TEST_F(IntentEngineTest, RefusesWrongFormatVersion) {
  const fs::path dir = copy_model("bad-version");
  nlohmann::json manifest = read_json(dir / "manifest.json");
  manifest["format_version"] = 2;
  write_json(dir / "manifest.json", manifest);
  expect_refused(dir, {"manifest.json", "format_version", "2"});
}

TEST_F(IntentEngineTest, RefusesWrongFormat) {
  const fs::path dir = copy_model("bad-format");
  nlohmann::json manifest = read_json(dir / "manifest.json");
  manifest["format"] = "something-else";
  write_json(dir / "manifest.json", manifest);
  expect_refused(dir, {"manifest.json", "\"format\"", "something-else"});
}

TEST_F(IntentEngineTest, RefusesCorruptManifestJson) {
  const fs::path dir = copy_model("corrupt-manifest");
  std::ofstream(dir / "manifest.json", std::ios::trunc) << "{ not json";
  expect_refused(dir, {"manifest.json", "invalid JSON"});
}

TEST_F(IntentEngineTest, RefusesAFileThatDiffersFromTheManifest) {
  const fs::path dir = copy_model("tampered-answers");
  nlohmann::json answers = read_json(dir / "answers.json");
  answers["refund"] = "Send us your bank password.";
  write_json(dir / "answers.json", answers);
  expect_refused(dir, {"manifest.json", "answers.json"});
}

TEST_F(IntentEngineTest, RefusesAMissingFile) {
  const fs::path dir = copy_model("missing-calibration");
  fs::remove(dir / "calibration.json");
  expect_refused(dir, {"calibration.json", "missing"});
}

TEST_F(IntentEngineTest, RefusesAManifestThatOmitsARequiredFile) {
  const fs::path dir = copy_model("unlisted-labels");
  nlohmann::json manifest = read_json(dir / "manifest.json");
  nlohmann::json files = nlohmann::json::array();
  for (const auto& file : manifest["files"]) {
    if (file["name"] != "labels.json") files.push_back(file);
  }
  manifest["files"] = files;
  write_json(dir / "manifest.json", manifest);
  expect_refused(dir, {"manifest.json", "files", "labels.json"});
}

TEST_F(IntentEngineTest, RefusesACorruptModelBinaryEvenWithAMatchingManifest) {
  const fs::path dir = copy_model("corrupt-model");
  std::ofstream(dir / "model.bin", std::ios::binary | std::ios::trunc) << "garbage, not fastText";
  nlohmann::json manifest = read_json(dir / "manifest.json");
  auto described = describe_file(dir, "model.bin");
  ASSERT_TRUE(described);
  for (auto& file : manifest["files"]) {
    if (file["name"] == "model.bin") {
      file["bytes"] = described->bytes;
      file["xxh64"] = described->xxh64;
    }
  }
  write_json(dir / "manifest.json", manifest);
  expect_refused(dir, {"model.bin", "cannot load"});
}

// The one rule for "the model's reading says little": its own out-of-scope label, or P(in scope)
// under one half (a model trained without out-of-scope rows still names its nearest intent).
TEST(LikelyOutOfScopeTest, TheOutOfScopeLabelOrLessThanAnEvenChanceOfBeingInScope) {
  EXPECT_TRUE(likely_out_of_scope(true, 0.9));
  EXPECT_TRUE(likely_out_of_scope(false, 0.08));
  EXPECT_TRUE(likely_out_of_scope(false, 0.49));
  EXPECT_FALSE(likely_out_of_scope(false, 0.5));
  EXPECT_FALSE(likely_out_of_scope(false, 0.97));
  IntentPrediction nearest;
  nearest.intent = "verify_my_identity";
  nearest.is_oos = false;
  nearest.in_scope = 0.08;
  EXPECT_TRUE(likely_out_of_scope(nearest));
}

double norm(const std::vector<float>& vector) {
  double sum = 0;
  for (float x : vector) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

// The engine's sentence vectors as an Embedder (edge/intent_embedder.h): in the model's domain a
// question embeds to a unit vector; out of it (likely_out_of_scope) to zeros, so the cache's
// semantic tier never pairs two questions the model knows nothing about by their collapsed means.
TEST_F(IntentEngineTest, AsAnEmbedderInScopeQuestionsGetUnitVectorsAndOutOfScopeOnesZeros) {
  auto engine = load();
  ASSERT_TRUE(engine);
  const IntentEmbedder embedder(*engine);
  ASSERT_FALSE(engine->predict("where is my order").is_oos);
  auto order = embedder.embed("where is my order");
  ASSERT_TRUE(order);
  ASSERT_EQ(order->size(), static_cast<std::size_t>(embedder.dim()));
  EXPECT_NEAR(norm(*order), 1.0, 1e-4);

  ASSERT_TRUE(engine->predict("tell me a joke").is_oos);
  auto joke = embedder.embed("tell me a joke");
  ASSERT_TRUE(joke);
  ASSERT_EQ(joke->size(), static_cast<std::size_t>(embedder.dim()));
  EXPECT_EQ(norm(*joke), 0.0);
  EXPECT_EQ(cosine(*joke, *order), 0.0f);
}

}  // namespace
}  // namespace hengshi::edge
