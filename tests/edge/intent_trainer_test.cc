#include "edge/intent_trainer.h"

#include <gtest/gtest.h>

#include "support/child_process.h"
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "edge/intent_engine.h"
#include "edge/model_manifest.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;


fs::path fixture(const std::string& name) {
  return fs::path(testing::source_path("tests/edge/fixtures")) / name;
}

class IntentTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = fs::temp_directory_path() / ("hengshi-intent-trainer-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(std::random_device{}()));
    fs::create_directories(work_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(work_, ec);
  }

  TrainOptions options_for(const std::string& data) const {
    TrainOptions options;
    options.data_path = fixture(data);
    options.out_dir = work_ / "model";
    options.autotune_budget_s = 0;  // the first grid point: fast and deterministic
    return options;
  }

  static void expect_error(const Result<TrainReport>& result, const std::string& code,
                           const std::vector<std::string>& fragments) {
    ASSERT_FALSE(result) << "training unexpectedly succeeded";
    EXPECT_EQ(result.error().code, code) << result.error().message;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(result.error().message.find(fragment), std::string::npos)
          << "\"" << fragment << "\" not in: " << result.error().message;
    }
  }

  fs::path work_;
};

TEST_F(IntentTrainerTest, RejectsEmptyFile) {
  expect_error(train_intent_model(options_for("intent_empty.jsonl")), "data_invalid",
               {"intent_empty.jsonl", "empty"});
}

TEST_F(IntentTrainerTest, RejectsMissingFile) {
  expect_error(train_intent_model(options_for("no_such_file.jsonl")), "data_invalid",
               {"no_such_file.jsonl", "cannot open"});
}

TEST_F(IntentTrainerTest, RejectsInvalidJsonNamingTheLine) {
  expect_error(train_intent_model(options_for("intent_bad_json.jsonl")), "data_invalid",
               {"intent_bad_json.jsonl:3", "invalid JSON"});
}

TEST_F(IntentTrainerTest, RejectsRowWithoutTextNamingTheLine) {
  expect_error(train_intent_model(options_for("intent_missing_text.jsonl")), "data_invalid",
               {"intent_missing_text.jsonl:3", "\"text\""});
}

TEST_F(IntentTrainerTest, RejectsEmptyIntentNamingTheLine) {
  expect_error(train_intent_model(options_for("intent_empty_intent.jsonl")), "data_invalid",
               {"intent_empty_intent.jsonl:2", "\"intent\"", "empty"});
}

TEST_F(IntentTrainerTest, RejectsTextWithoutWordsNamingTheLine) {
  expect_error(train_intent_model(options_for("intent_punctuation_only.jsonl")), "data_invalid",
               {"intent_punctuation_only.jsonl:3", "no words"});
}

TEST_F(IntentTrainerTest, RejectsASingleInScopeIntent) {
  expect_error(train_intent_model(options_for("intent_single.jsonl")), "data_invalid",
               {"intent_single.jsonl", "at least 2 in-scope intents", "greet"});
}

TEST_F(IntentTrainerTest, RejectsDuplicateFaqAnswers) {
  TrainOptions options = options_for("intent_small.jsonl");
  options.answers_path = fixture("intent_answers_duplicate.jsonl");
  expect_error(train_intent_model(options), "data_invalid",
               {"intent_answers_duplicate.jsonl:2", "refund"});
}

TEST_F(IntentTrainerTest, RejectsBadHoldoutAndForeignOutputDirectory) {
  TrainOptions options = options_for("intent_small.jsonl");
  options.holdout = 0.9;
  expect_error(train_intent_model(options), "invalid_argument", {"holdout"});

  options = options_for("intent_small.jsonl");
  fs::create_directories(options.out_dir);
  std::ofstream(options.out_dir / "notes.txt") << "not a model";
  expect_error(train_intent_model(options), "invalid_argument", {"not a model directory"});
  EXPECT_TRUE(fs::exists(options.out_dir / "notes.txt"));  // left alone
}

TEST_F(IntentTrainerTest, WritesAVersionedModelDirectory) {
  TrainOptions options = options_for("intent_small.jsonl");
  options.answers_path = fixture("intent_answers.jsonl");
  auto report = train_intent_model(options);
  ASSERT_TRUE(report) << report.error().message;

  EXPECT_EQ(report->rows, 50u);
  EXPECT_EQ(report->intents, 5u);
  EXPECT_EQ(report->oos_rows, 10u);
  EXPECT_EQ(report->holdout_rows, 5u);  // one per intent (10 rows · 0.1)
  EXPECT_EQ(report->train_rows + report->holdout_rows, report->rows);
  EXPECT_EQ(report->holdout_examples.size(), report->holdout_rows);
  EXPECT_EQ(report->model_file, "model.bin");
  EXPECT_FALSE(report->model_version.empty());

  for (const char* name : {"manifest.json", "model.bin", "labels.json", "answers.json",
                           "normalizer.json", "calibration.json"}) {
    EXPECT_TRUE(fs::exists(options.out_dir / name)) << name;
  }
  EXPECT_FALSE(fs::exists(options.out_dir / "train.txt"));

  auto manifest = load_verified_manifest(options.out_dir);
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_EQ(manifest->format, "hengshi-intent");
  EXPECT_EQ(manifest->format_version, 1);
  EXPECT_EQ(manifest->model_version, report->model_version);
  EXPECT_EQ(manifest->training["rows"], 50);
  EXPECT_EQ(manifest->training["data_xxh64"].get<std::string>().size(), 16u);
  EXPECT_TRUE(manifest->holdout_metrics.contains("ece_before"));
  EXPECT_TRUE(manifest->holdout_metrics.contains("ece_after"));
  EXPECT_TRUE(manifest->hyperparameters.contains("epoch"));
  // A small set calibrates on out-of-fold predictions; its holdout stays out of sample.
  EXPECT_EQ(report->calibration_source, "cross_validation");
  EXPECT_EQ(report->calibration.examples, report->train_rows);
  EXPECT_EQ(manifest->holdout_metrics["calibrated_on"], "cross_validation");
  std::ifstream calibration_in(options.out_dir / "calibration.json");
  const nlohmann::json calibration = nlohmann::json::parse(calibration_in);
  EXPECT_TRUE(calibration.contains("method"));
  EXPECT_EQ(calibration["holdout"]["reliability"].size(), 10u);

  // The FAQ file wins over the rows' answers; rows fill the rest.
  std::ifstream answers_in(options.out_dir / "answers.json");
  const nlohmann::json answers = nlohmann::json::parse(answers_in);
  EXPECT_EQ(answers["refund"], "FAQ file answer: refunds in 1-3 days.");
  EXPECT_EQ(answers["password_reset"],
            "Tap Forgot password on the login page. 在登录页点「忘记密码」。");
  EXPECT_FALSE(answers.contains("__oos__"));
}

TEST_F(IntentTrainerTest, TrainedModelPredictsATrainingParaphrase) {
  TrainOptions options = options_for("intent_small.jsonl");
  auto report = train_intent_model(options);
  ASSERT_TRUE(report) << report.error().message;
  auto engine = IntentEngine::load(options.out_dir);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->predict("where is my order").intent, "order_status");
  EXPECT_EQ((*engine)->predict("怎么申请退款").intent, "refund");
  EXPECT_EQ((*engine)->predict("I forgot my password").intent, "password_reset");
}

TEST_F(IntentTrainerTest, SameSeedGivesTheSameModel) {
  TrainOptions options = options_for("intent_small.jsonl");
  ASSERT_TRUE(train_intent_model(options));
  auto first = describe_file(options.out_dir, "model.bin");
  ASSERT_TRUE(first);
  ASSERT_TRUE(train_intent_model(options));  // replaces the previous model directory
  auto second = describe_file(options.out_dir, "model.bin");
  ASSERT_TRUE(second);
  EXPECT_EQ(first->xxh64, second->xxh64);
}

TEST_F(IntentTrainerTest, SearchTriesGridPointsWithinBudget) {
  TrainOptions options = options_for("intent_small.jsonl");
  options.autotune_budget_s = 30;
  auto report = train_intent_model(options);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_GE(report->trials.size(), 2u);
  EXPECT_GT(report->validation_rows, 0u);
  bool chosen_was_tried = false;
  for (const SearchTrial& trial : report->trials) {
    chosen_was_tried |= trial.params.epoch == report->params.epoch &&
                        trial.params.lr == report->params.lr &&
                        trial.params.minn == report->params.minn &&
                        trial.params.word_ngrams == report->params.word_ngrams;
  }
  EXPECT_TRUE(chosen_was_tried);
}

TEST_F(IntentTrainerTest, QuantizedModelIsSmallerAndStillPredicts) {
  TrainOptions options = options_for("intent_small.jsonl");
  auto plain = train_intent_model(options);
  ASSERT_TRUE(plain) << plain.error().message;

  options.out_dir = work_ / "model-ftz";
  options.quantize = true;
  options.quantize_params.cutoff = 2000;  // small fixture: keep quantisation fast
  auto quantized = train_intent_model(options);
  ASSERT_TRUE(quantized) << quantized.error().message;
  EXPECT_EQ(quantized->model_file, "model.ftz");
  EXPECT_TRUE(fs::exists(options.out_dir / "model.ftz"));
  EXPECT_LT(quantized->model_bytes, plain->model_bytes / 4);
  auto engine = IntentEngine::load(options.out_dir);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->predict("where is my order").intent, "order_status");
}

// Pretrained word vectors carry the model to words its rows never used: each probe word below is
// absent from the fixture but shares its vector with a word that is there, and only the vectors
// can tell the model which intent it belongs to.
TEST_F(IntentTrainerTest, WordVectorsLetUnseenSynonymsFindTheirIntent) {
  const fs::path vectors = work_ / "words.vec";
  {
    constexpr int kWidth = 8;
    const std::vector<std::pair<std::vector<std::string>, int>> groups = {
        {{"password", "passcode"}, 0}, {{"refund", "reimbursement"}, 1},
        {{"order", "parcel"}, 2}, {{"hours", "timetable"}, 3}};
    std::ofstream out(vectors);
    out << 8 << ' ' << kWidth << '\n';
    for (const auto& [words, axis] : groups) {
      for (const std::string& word : words) {
        out << word;
        for (int k = 0; k < kWidth; ++k) out << ' ' << (k == 2 * axis || k == 2 * axis + 1 ? 3.0 : 0.0);
        out << '\n';
      }
    }
  }
  TrainOptions options = options_for("intent_small.jsonl");
  options.word_vectors = vectors;
  FastTextParams params;
  params.minn = 0;  // no sub-word n-grams: an unseen word is its vector or nothing
  params.maxn = 0;
  params.word_ngrams = 1;
  options.fixed_params = params;
  auto report = train_intent_model(options);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->params.dim, 8);
  auto engine = IntentEngine::load(options.out_dir);
  ASSERT_TRUE(engine) << engine.error().message;
  EXPECT_EQ((*engine)->dim(), 8);
  EXPECT_EQ((*engine)->predict("passcode").intent, "password_reset");
  EXPECT_EQ((*engine)->predict("reimbursement").intent, "refund");
  EXPECT_EQ((*engine)->predict("parcel").intent, "order_status");
  EXPECT_EQ((*engine)->predict("timetable").intent, "opening_hours");

  auto manifest = load_verified_manifest(options.out_dir);
  ASSERT_TRUE(manifest) << manifest.error().message;
  EXPECT_EQ(manifest->hyperparameters["pretrained_vectors"], "words.vec");
  EXPECT_EQ(manifest->training["word_vectors_xxh64"].get<std::string>().size(), 16u);
  EXPECT_EQ(manifest->training["word_vectors_bytes"], fs::file_size(vectors));
}

TEST_F(IntentTrainerTest, RejectsAWordVectorFileWithoutItsHeader) {
  const fs::path vectors = work_ / "headless.vec";
  std::ofstream(vectors) << "password 1 0 0 0\nrefund 0 1 0 0\n";
  TrainOptions options = options_for("intent_small.jsonl");
  options.word_vectors = vectors;
  expect_error(train_intent_model(options), "invalid_argument", {"headless.vec", "not a .vec"});
  EXPECT_FALSE(fs::exists(options.out_dir));
  options.word_vectors = work_ / "absent.vec";
  expect_error(train_intent_model(options), "invalid_argument", {"absent.vec", "cannot open"});
}

// The demo FAQ shipped for `scripts/run` must train and answer new phrasings at the edge.
TEST_F(IntentTrainerTest, DemoFaqAnswersUnseenQuestions) {
  TrainOptions options;
  options.data_path = testing::source_path("data/demo_faq.jsonl");
  options.out_dir = work_ / "demo";
  auto report = train_intent_model(options);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->warnings.empty()) << report->warnings.front();
  EXPECT_GE(report->intents, 25u);
  auto engine = IntentEngine::load(options.out_dir);
  ASSERT_TRUE(engine) << engine.error().message;

  const std::vector<std::pair<std::string, std::string>> unseen = {
      {"我的订单现在到哪里了？", "order_status"},
      {"how can I get a refund", "refund_request"},
      {"忘了密码怎么办", "password_reset"},
      {"I need to talk to a real person", "contact_human"},
      {"请帮我取消这个订单", "cancel_order"},
      {"can I change the delivery address", "change_address"},
      {"你们支持哪些付款方式", "payment_methods"},
      {"how long will delivery take", "shipping_time"},
      {"发票怎么开", "invoice_request"},
      {"my card got stolen", "card_lost"},
  };
  int right = 0;
  for (const auto& [text, intent] : unseen) {
    const IntentPrediction prediction = (*engine)->predict(text);
    right += prediction.intent == intent ? 1 : 0;
    if (prediction.intent == intent) {
      EXPECT_FALSE(prediction.answer.empty()) << text;
    }
  }
  EXPECT_GE(right, 8) << "of " << unseen.size();

  int refused = 0;
  for (const std::string text : {"what's the weather in Beijing", "给我讲一个笑话吧",
                                 "how do I sort an array in java", "我发烧了吃什么药"}) {
    refused += answerable((*engine)->predict(text), 0.5) ? 0 : 1;
  }
  EXPECT_GE(refused, 3);
}

}  // namespace
}  // namespace hengshi::edge
