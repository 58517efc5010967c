#include "edge/cross_fit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "edge/intent_trainer.h"
#include "support/child_process.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

// The word only one training row uses: a model that saw that row knows it, one that did not has
// no token to read (sub-word n-grams are off in the recipe below).
constexpr const char* kUniqueRow = "zqxvwk";

class CrossFitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = fs::temp_directory_path() /
            ("hengshi-cross-fit-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(work_);
    data_ = work_ / "rows.jsonl";
    fs::copy_file(testing::source_path("tests/edge/fixtures/intent_small.jsonl"), data_);
    std::ofstream(data_, std::ios::app) << "{\"text\": \"" << kUniqueRow << "\", \"intent\": \"refund\"}\n";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(work_, ec);
  }

  // The served model: fixed parameters without sub-word n-grams, the out-of-scope score on.
  Result<TrainReport> train_served() {
    TrainOptions options;
    options.data_path = data_;
    options.out_dir = work_ / "model";
    options.autotune_budget_s = 0;
    FastTextParams params;
    params.minn = 0;
    params.maxn = 0;
    params.word_ngrams = 1;
    params.epoch = 40;
    options.fixed_params = params;
    options.seed = 7;
    return train_intent_model(options);
  }

  CrossFitOptions cross(int folds) const {
    CrossFitOptions options;
    options.model_dir = work_ / "model";
    options.folds = folds;
    options.work_dir = work_;
    return options;
  }

  fs::path work_;
  fs::path data_;
};

TEST_F(CrossFitTest, EveryTrainingRowIsPredictedByAFoldModelThatNeverSawIt) {
  auto served = train_served();
  ASSERT_TRUE(served) << served.error().message;
  auto engine = IntentEngine::load(work_ / "model");
  ASSERT_TRUE(engine) << engine.error().message;
  ASSERT_EQ((*engine)->predict(kUniqueRow).intent, "refund");  // the served model saw the row

  auto report = cross_fit_predictions(cross(3));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->folds, 3);
  EXPECT_EQ(report->data_file, data_);
  ASSERT_EQ(report->rows.size(), 51u);  // the fixture's 50 rows and the unique one, in file order
  std::set<int> folds;
  std::size_t right = 0;
  for (const OutOfFoldRow& row : report->rows) {
    folds.insert(row.fold);
    if (row.prediction.intent == row.intent) ++right;
  }
  EXPECT_EQ(folds, (std::set<int>{0, 1, 2}));
  const OutOfFoldRow& unique = report->rows.back();
  EXPECT_EQ(unique.text, kUniqueRow);
  EXPECT_EQ(unique.intent, "refund");
  // Its fold model never read the word: no usable token, so out of scope and no answer.
  EXPECT_TRUE(unique.prediction.is_oos) << unique.prediction.intent;
  EXPECT_TRUE(unique.prediction.answer.empty());
  // The other rows are paraphrases of their intents: most are still right out of fold.
  EXPECT_GT(right, report->rows.size() / 2) << right << " of " << report->rows.size();
  // The fold models are gone; the served model is untouched.
  for (const auto& entry : fs::directory_iterator(work_)) {
    EXPECT_EQ(entry.path().filename().string().rfind("hengshi-cross-fit-", 0), std::string::npos) << entry.path();
  }
  EXPECT_TRUE(IntentEngine::load(work_ / "model"));
}

TEST_F(CrossFitTest, RefusesWhenTheTrainingDataChangedSinceTheModel) {
  ASSERT_TRUE(train_served());
  std::ofstream(data_, std::ios::app) << "{\"text\": \"one more row\", \"intent\": \"refund\"}\n";
  auto report = cross_fit_predictions(cross(3));
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, "data_changed");
  EXPECT_NE(report.error().message.find("rows.jsonl"), std::string::npos) << report.error().message;
  fs::remove(data_);
  report = cross_fit_predictions(cross(3));
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, "data_changed");
  EXPECT_NE(report.error().message.find("gone"), std::string::npos) << report.error().message;
}

TEST_F(CrossFitTest, RefusesFoldCountsOutOfRange) {
  ASSERT_TRUE(train_served());
  for (int folds : {0, 1, 21}) {
    auto report = cross_fit_predictions(cross(folds));
    ASSERT_FALSE(report) << folds;
    EXPECT_EQ(report.error().code, "invalid_argument");
  }
}

TEST(FastTextParamsJsonTest, TheManifestsHyperParametersReadBack) {
  FastTextParams params;
  params.lr = 0.3;
  params.epoch = 17;
  params.dim = 12;
  params.word_ngrams = 3;
  params.minn = 2;
  params.maxn = 4;
  params.bucket = 5000;
  params.seed = 9;
  params.one_vs_all = true;
  auto back = fast_text_params_from_json(params.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_DOUBLE_EQ(back->lr, 0.3);
  EXPECT_EQ(back->epoch, 17);
  EXPECT_EQ(back->dim, 12);
  EXPECT_EQ(back->word_ngrams, 3);
  EXPECT_EQ(back->minn, 2);
  EXPECT_EQ(back->maxn, 4);
  EXPECT_EQ(back->bucket, 5000);
  EXPECT_EQ(back->seed, 9);
  EXPECT_TRUE(back->one_vs_all);
  nlohmann::json missing = params.to_json();
  missing.erase("dim");
  auto refused = fast_text_params_from_json(missing);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "model_invalid");
}

}  // namespace
}  // namespace hengshi::edge
