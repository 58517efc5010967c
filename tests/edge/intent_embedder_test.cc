#include "edge/intent_embedder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "edge/intent_trainer.h"
#include "support/child_process.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class IntentEmbedderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new fs::path(fs::temp_directory_path() / ("hengshi-intent-embedder-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(std::random_device{}())));
    fs::create_directories(*work_);
    TrainOptions options;
    options.data_path = testing::source_path("tests/edge/fixtures/intent_small.jsonl");
    options.out_dir = *work_ / "model";
    options.autotune_budget_s = 0;
    auto report = train_intent_model(options);
    ASSERT_TRUE(report) << report.error().message;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*work_, ec);
    delete work_;
    work_ = nullptr;
  }
  static fs::path* work_;
};
fs::path* IntentEmbedderTest::work_ = nullptr;

double norm(const std::vector<float>& vector) {
  double sum = 0;
  for (float x : vector) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

// In the model's domain a question embeds to a unit vector; out of it (the engine says out of
// scope) to zeros, so the cache's semantic tier never pairs two questions the model knows
// nothing about by their collapsed word means.
TEST_F(IntentEmbedderTest, InScopeQuestionsEmbedToUnitVectorsAndOutOfScopeOnesToZeros) {
  auto engine = IntentEngine::load(*work_ / "model");
  ASSERT_TRUE(engine) << engine.error().message;
  const IntentEmbedder embedder(**engine);
  ASSERT_FALSE((*engine)->predict("where is my order").is_oos);
  auto order = embedder.embed("where is my order");
  ASSERT_TRUE(order);
  ASSERT_EQ(order->size(), static_cast<std::size_t>(embedder.dim()));
  EXPECT_NEAR(norm(*order), 1.0, 1e-4);

  ASSERT_TRUE((*engine)->predict("tell me a joke").is_oos);
  auto joke = embedder.embed("tell me a joke");
  ASSERT_TRUE(joke);
  ASSERT_EQ(joke->size(), static_cast<std::size_t>(embedder.dim()));
  EXPECT_EQ(norm(*joke), 0.0);
  EXPECT_EQ(cosine(*joke, *order), 0.0f);
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

}  // namespace
}  // namespace hengshi::edge
