#include "router/complexity_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "edge/oos_score.h"
#include "router/complexity_trainer.h"
#include "router/decide.h"
#include "router/router_policy.h"

namespace hengshi::router {
namespace {

namespace fs = std::filesystem;

// Texts like the hard and easy rows of the generated set, for the decide() tests.
const std::string kHardText =
    "Let f(x) = 3x^2 + 17x - 42 and g(x) = sqrt(x + 9). Which statement is NOT true?\n"
    "I. f(g(7)) = 181\nII. g has 2 real roots\nIII. f'(2) = 29\n"
    "A. I only\nB. II only\nC. I and III\nD. II and III\nAnswer:";
const std::string kEasyText = "What time do you open on Saturday?";

// Generated rows: hard ones are long, multi-line, full of numbers and symbols; easy ones are
// short plain questions. 10% of labels are flipped, as real labels are noisy.
std::vector<ComplexityRow> generated_rows(std::size_t per_class, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  const std::vector<std::string> easy_stems = {
      "What time do you open on", "Where is the nearest store to", "Can I return a gift from",
      "How much is delivery to", "Do you sell tickets for", "Who do I call about"};
  const std::vector<std::string> places = {"Monday", "Berlin", "the airport", "Sunday", "Paris",
                                           "my office"};
  std::vector<ComplexityRow> rows;
  for (std::size_t i = 0; i < per_class; ++i) {
    const int a = static_cast<int>(random() % 90) + 10, b = static_cast<int>(random() % 900) + 100;
    ComplexityRow hard;
    hard.text = "Suppose the polynomial p(x) = " + std::to_string(a) + "x^3 - " +
                std::to_string(b) + "x + " + std::to_string(a * 7) +
                " has roots r1, r2, r3. Which of the following is NOT necessarily true?\n"
                "A. r1 + r2 + r3 = 0\nB. r1*r2*r3 = " + std::to_string(-a * 7) + "/" +
                std::to_string(a) + "\nC. p'(1) = " + std::to_string(3 * a - b) +
                "\nD. EXCEPT when " + std::to_string(b % 17) + " divides " + std::to_string(b) +
                "\nAnswer:";
    hard.hard = random() % 10 != 0;
    ComplexityRow easy;
    easy.text = easy_stems[random() % easy_stems.size()] + " " + places[random() % places.size()] + "?";
    easy.hard = random() % 10 == 0;
    rows.push_back(std::move(hard));
    rows.push_back(std::move(easy));
  }
  return rows;
}

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("hengshi-complexity-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

fs::path write_rows(const fs::path& dir, const std::vector<ComplexityRow>& rows) {
  const fs::path file = dir / "rows.jsonl";
  std::ofstream out(file);
  for (const auto& row : rows) {
    out << nlohmann::json{{"text", row.text}, {"small_correct", !row.hard}}.dump() << "\n";
  }
  return file;
}

std::vector<bool> labels_of(const std::vector<ComplexityRow>& rows) {
  std::vector<bool> labels;
  for (const auto& row : rows) labels.push_back(row.hard);
  return labels;
}

TEST(ComplexityMetricsTest, RocAucCountsPairsAndTiesHalf) {
  EXPECT_DOUBLE_EQ(edge::auroc({0.1, 0.2, 0.8, 0.9}, {false, false, true, true}), 1.0);
  EXPECT_DOUBLE_EQ(edge::auroc({0.9, 0.8, 0.2, 0.1}, {false, false, true, true}), 0.0);
  EXPECT_DOUBLE_EQ(edge::auroc({0.5, 0.5, 0.5, 0.5}, {false, true, false, true}), 0.5);
  // One positive above one negative, tied with the other: (1 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(edge::auroc({0.3, 0.5, 0.5}, {false, false, true}), 0.75);
  EXPECT_DOUBLE_EQ(edge::auroc({0.1, 0.2}, {true, true}), 0.5);  // one class only
}

TEST(ComplexityMetricsTest, CutForShareLeavesThatShareAtOrAbove) {
  const std::vector<double> scores = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
  EXPECT_DOUBLE_EQ(cut_for_share(scores, 0.5), 0.6);
  EXPECT_DOUBLE_EQ(cut_for_share(scores, 1.0), 0.1);
  EXPECT_DOUBLE_EQ(cut_for_share(scores, 0.25), 0.8);  // ceil(2.5) = 3 rows
  EXPECT_GT(cut_for_share(scores, 0.0), 1.0);          // nothing reaches it
}

TEST(ComplexityVectorTest, FeaturesReadWhatTheirNamesSay) {
  const auto names = complexity_feature_names();
  const auto index = [&](std::string_view name) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  const ComplexityVector hard = complexity_vector(kHardText, 1);
  const ComplexityVector easy = complexity_vector(kEasyText, 1);
  EXPECT_GT(hard[index("digit_share")], 0.05);
  EXPECT_DOUBLE_EQ(easy[index("digit_share")], 0.0);
  EXPECT_DOUBLE_EQ(hard[index("negation_words")], 1.0);  // "NOT"
  // Whole words, letters only, any case; a longer word that starts like one is not one.
  EXPECT_DOUBLE_EQ(
      complexity_vector("nothing notwithstanding cannot, EXCEPT not. Incorrect?", 1)
          [index("negation_words")],
      4.0);
  EXPECT_GT(hard[index("log_lines")], easy[index("log_lines")]);
  EXPECT_GT(hard[index("log_tokens")], easy[index("log_tokens")]);
  EXPECT_DOUBLE_EQ(easy[index("first_line_share")], 1.0);
  EXPECT_DOUBLE_EQ(complexity_vector("", 1)[index("log_tokens")], 0.0);
  // Invalid UTF-8 and NUL bytes are just bytes.
  const ComplexityVector odd = complexity_vector(std::string("\xff\xfe\0abc", 6), 1);
  EXPECT_GT(odd[index("non_ascii_share")], 0.0);
}

TEST(ComplexityTrainerTest, LearnedScoreRanksHeldOutHardAboveEasy) {
  const std::vector<ComplexityRow> train = generated_rows(150, 1);
  const std::vector<ComplexityRow> held_out = generated_rows(100, 2);
  ComplexityTrainOptions options;
  options.large_share = 0.5;
  auto report = train_complexity_model(train, options);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->rows, 300u);
  std::vector<double> scores;
  for (const auto& row : held_out) scores.push_back(report->model->score(row.text, 1));
  // 10% of the labels are flipped both ways, so a perfect ranking of the texts scores about
  // 0.86; chance is 0.5.
  EXPECT_GT(edge::auroc(scores, labels_of(held_out)), 0.8);
  const ComplexityModel& model = *report->model;
  EXPECT_GT(model.score(kHardText, 1), model.score(kEasyText, 1));
  EXPECT_TRUE(model.is_hard(model.score(kHardText, 1)));
  EXPECT_FALSE(model.is_hard(model.score(kEasyText, 1)));
  EXPECT_DOUBLE_EQ(model.large_share(), 0.5);
  // About half the training rows are at or above the cut.
  std::size_t above = 0;
  for (const auto& row : train) above += model.is_hard(model.score(row.text, 1)) ? 1 : 0;
  EXPECT_GE(above, 150u);
  EXPECT_LE(above, 160u);
}

TEST(ComplexityTrainerTest, AnInputFarOutsideTheTrainingRangeCountsAsTheRangesEdge) {
  // In the generated rows long words and digits lean hard, but no row is one long run of digits.
  // A card number pasted alone is 10+ sd past every training row on those inputs: a score that
  // extrapolates calls it hard. Capped, its other inputs (one short line) still count.
  auto report = train_complexity_model(generated_rows(150, 1), {});
  ASSERT_TRUE(report.ok()) << report.error().message;
  const ComplexityModel& model = *report->model;
  EXPECT_DOUBLE_EQ(model.logistic().clip, kStandardisedInputCap);
  const std::string card_number = "4111111111111111";
  EXPECT_FALSE(model.is_hard(model.score(card_number, 1)));
  LogisticWeights uncapped = model.logistic();
  uncapped.clip = 0;
  const ComplexityModel extrapolating(ComplexityKind::kFeatures, uncapped, nullptr, {},
                                      model.cut(), model.large_share(), "uncapped");
  EXPECT_TRUE(extrapolating.is_hard(extrapolating.score(card_number, 1)));
}

TEST(LogisticWeightsTest, StandardisedInputsAreCappedAndTheCapRoundTrips) {
  LogisticWeights weights{.mean = {1.0, 0.0}, .scale = {2.0, 1.0}, .weights = {1.0, -1.0},
                          .bias = 0.5, .clip = 4.0};
  EXPECT_DOUBLE_EQ(weights.standardised(0, 5.0), 2.0);
  EXPECT_DOUBLE_EQ(weights.standardised(0, 101.0), 4.0);
  EXPECT_DOUBLE_EQ(weights.standardised(1, -100.0), -4.0);
  EXPECT_DOUBLE_EQ(weights.log_odds(std::vector<double>{101.0, -100.0}), 0.5 + 4.0 + 4.0);

  auto read = LogisticWeights::from_json(weights.to_json(), 2, "weights.json");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_DOUBLE_EQ(read->clip, 4.0);
  // A model trained before the cap has no "clip": its inputs are not capped.
  nlohmann::json old = weights.to_json();
  old.erase("clip");
  auto old_read = LogisticWeights::from_json(old, 2, "weights.json");
  ASSERT_TRUE(old_read.ok());
  EXPECT_DOUBLE_EQ(old_read->clip, 0.0);
  EXPECT_DOUBLE_EQ(old_read->standardised(0, 101.0), 50.0);
  old["clip"] = -1;
  auto bad = LogisticWeights::from_json(old, 2, "weights.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("clip"), std::string::npos);
}

TEST(ComplexityTrainerTest, RejectsOneClassDataAndBadShares) {
  std::vector<ComplexityRow> rows = generated_rows(5, 3);
  ComplexityTrainOptions options;
  options.large_share = 1.5;
  EXPECT_EQ(train_complexity_model(rows, options).error().code, "invalid_argument");
  for (auto& row : rows) row.hard = false;
  EXPECT_EQ(train_complexity_model(rows, {}).error().code, "invalid_argument");
}

TEST(ComplexityTrainerTest, DataErrorsNameFileAndLine) {
  const fs::path dir = scratch_dir("bad-data");
  const fs::path file = dir / "rows.jsonl";
  std::ofstream(file) << R"({"text": "a", "small_correct": true})" "\n"
                      << R"({"text": "b", "small_correct": "yes"})" "\n";
  auto rows = read_complexity_rows(file.string());
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.error().code, "data_invalid");
  EXPECT_NE(rows.error().message.find(":2:"), std::string::npos) << rows.error().message;
  EXPECT_NE(rows.error().message.find("small_correct"), std::string::npos);
  fs::remove_all(dir);
}

TEST(ComplexityModelDirTest, RoundTripsThroughTheManifest) {
  const fs::path dir = scratch_dir("roundtrip");
  const std::vector<ComplexityRow> rows = generated_rows(100, 4);
  ComplexityTrainOptions options;
  options.large_share = 0.3;
  auto report = train_complexity_directory(write_rows(dir, rows).string(), dir / "complexity", options);
  ASSERT_TRUE(report.ok()) << report.error().message;

  auto loaded = ComplexityModel::load(dir / "complexity");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const ComplexityModel& model = **loaded;
  EXPECT_EQ(model.version(), report->model->version());
  EXPECT_EQ(model.kind(), ComplexityKind::kFeatures);
  EXPECT_DOUBLE_EQ(model.cut(), report->model->cut());
  EXPECT_DOUBLE_EQ(model.large_share(), 0.3);
  for (const std::string& text : {kHardText, kEasyText, rows[7].text}) {
    EXPECT_DOUBLE_EQ(model.score(text, 1), report->model->score(text, 1)) << text;
  }
  std::ifstream manifest_in(dir / "complexity" / "manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_in);
  EXPECT_EQ(manifest["format"], "hengshi-complexity");
  EXPECT_EQ(manifest["cut"]["large_share"], 0.3);
  EXPECT_EQ(manifest["training"]["rows"], 200);

  // Retraining replaces the directory in place.
  options.large_share = 0.6;
  ASSERT_TRUE(train_complexity_directory((dir / "rows.jsonl").string(), dir / "complexity", options).ok());
  EXPECT_DOUBLE_EQ((*ComplexityModel::load(dir / "complexity"))->large_share(), 0.6);
  // A folder that is not a model is never overwritten.
  fs::create_directories(dir / "precious");
  std::ofstream(dir / "precious" / "notes.txt") << "keep me";
  EXPECT_EQ(train_complexity_directory((dir / "rows.jsonl").string(), dir / "precious", options)
                .error()
                .code,
            "invalid_argument");
  EXPECT_TRUE(fs::exists(dir / "precious" / "notes.txt"));
  fs::remove_all(dir);
}

TEST(ComplexityModelDirTest, RefusesChangedFilesAndOtherFormats) {
  const fs::path dir = scratch_dir("tamper");
  ASSERT_TRUE(train_complexity_directory(write_rows(dir, generated_rows(30, 5)).string(),
                                         dir / "model", {})
                  .ok());
  // A weight edited after training: the hash no longer matches.
  {
    std::ofstream out(dir / "model" / "weights.json", std::ios::app);
    out << " ";
  }
  auto changed = ComplexityModel::load(dir / "model");
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.error().code, "model_invalid");
  EXPECT_NE(changed.error().message.find("weights.json"), std::string::npos);

  // An intent model's manifest is not a complexity model.
  std::ofstream(dir / "model" / "manifest.json") << R"({"format": "hengshi-intent", "format_version": 1})";
  auto other = ComplexityModel::load(dir / "model");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("format"), std::string::npos);
  EXPECT_EQ(ComplexityModel::load(dir / "missing").error().code, "model_invalid");
  fs::remove_all(dir);
}

TEST(ComplexityModelDirTest, FastTextKindTrainsAndRoundTrips) {
  const fs::path dir = scratch_dir("fasttext");
  ComplexityTrainOptions options;
  options.kind = ComplexityKind::kFastText;
  auto report = train_complexity_directory(write_rows(dir, generated_rows(100, 6)).string(),
                                           dir / "model", options);
  ASSERT_TRUE(report.ok()) << report.error().message;
  auto loaded = ComplexityModel::load(dir / "model");
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ((*loaded)->kind(), ComplexityKind::kFastText);
  EXPECT_TRUE(fs::exists(dir / "model" / "model.bin"));
  EXPECT_GT((*loaded)->fasttext_log_odds(kHardText), (*loaded)->fasttext_log_odds(kEasyText));
  EXPECT_GT((*loaded)->score(kHardText, 1), (*loaded)->score(kEasyText, 1));
  EXPECT_NEAR((*loaded)->score(kHardText, 1), report->model->score(kHardText, 1), 1e-9);
  fs::remove_all(dir);
}

// ---- decide() with a learned model ----

class DecideWithComplexityModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(scratch_dir("decide"));
    ASSERT_TRUE(train_complexity_directory(write_rows(*dir_, generated_rows(100, 7)).string(),
                                           *dir_ / "complexity", {})
                    .ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  std::shared_ptr<const RouterPolicy> policy(bool with_model) {
    auto policy = parse_router_policy("", "test-policy.yaml", "",
                                      with_model ? (*dir_ / "complexity").string() : "");
    EXPECT_TRUE(policy.ok()) << (policy.ok() ? "" : policy.error().message);
    return *policy;
  }

  Decision route(const std::string& text, const edge::IntentPrediction* prediction,
                 const RouterPolicy& policy) {
    texts_ = {text};
    RouteInput input;
    input.texts = {texts_[0]};
    input.last_user_text = texts_[0];
    input.task_type = "faq";
    input.pools = {"cloud-small", "cloud-large"};
    input.prediction = prediction;
    RouterRuntime runtime(policy);
    return decide(input, policy, runtime);
  }

  static edge::IntentPrediction in_scope(double confidence) {
    edge::IntentPrediction prediction;
    prediction.intent = "opening_hours";
    prediction.answer = "We open at 9.";
    prediction.confidence = confidence;
    prediction.is_oos = false;
    return prediction;
  }

  static fs::path* dir_;
  std::vector<std::string> texts_;
};

fs::path* DecideWithComplexityModelTest::dir_ = nullptr;

TEST_F(DecideWithComplexityModelTest, LowConfidenceGoesToCloudSmallUnlessTheModelSaysHard) {
  const auto with_model = policy(true);
  EXPECT_NE(with_model->version.find("+cx-"), std::string::npos) << with_model->version;
  const edge::IntentPrediction low = in_scope(0.1);

  Decision easy = route(kEasyText, &low, *with_model);
  EXPECT_EQ(easy.route, Route::cloud_small);
  EXPECT_EQ(easy.reason, Reason::low_confidence);
  EXPECT_EQ(easy.fallback_type, FallbackType::quality);
  EXPECT_LT(easy.figures["complexity_score"].get<double>(), easy.figures["complexity_cut"].get<double>());
  EXPECT_EQ(easy.figures["complexity_verdict"], "not_hard");

  Decision hard = route(kHardText, &low, *with_model);
  EXPECT_EQ(hard.route, Route::cloud_large);
  EXPECT_EQ(hard.reason, Reason::complexity_hard);
  EXPECT_EQ(to_string(hard.reason), "complexity_hard");
  EXPECT_EQ(hard.fallback_type, FallbackType::quality);
  EXPECT_GE(hard.figures["complexity_score"].get<double>(), hard.figures["complexity_cut"].get<double>());
  EXPECT_EQ(hard.figures["complexity_verdict"], "hard");
}

TEST_F(DecideWithComplexityModelTest, TheModelNeverTakesAQuestionFromAnEdgeThatKnowsIt) {
  const auto with_model = policy(true);
  const edge::IntentPrediction confident = in_scope(0.99);
  const Decision decision = route(kHardText, &confident, *with_model);
  EXPECT_EQ(decision.route, Route::edge);
  EXPECT_EQ(decision.reason, Reason::high_confidence);
  EXPECT_FALSE(decision.figures.contains("complexity_score"));  // never scored: not needed
}

TEST_F(DecideWithComplexityModelTest, OutOfScopeAndNoIntentEngineAreTieredToo) {
  const auto with_model = policy(true);
  edge::IntentPrediction oos;
  oos.intent = "__oos__";
  oos.is_oos = true;
  oos.confidence = 0.9;
  EXPECT_EQ(route(kHardText, &oos, *with_model).reason, Reason::complexity_hard);
  EXPECT_EQ(route(kEasyText, &oos, *with_model).reason, Reason::out_of_scope);
  EXPECT_EQ(route(kHardText, nullptr, *with_model).route, Route::cloud_large);
  EXPECT_EQ(route(kEasyText, nullptr, *with_model).reason, Reason::default_pool);
}

TEST_F(DecideWithComplexityModelTest, WithoutAModelLowConfidenceGoesToCloudSmall) {
  const auto hand = policy(false);
  EXPECT_EQ(hand->confidence.low_band_route, "cloud-small");
  const edge::IntentPrediction low = in_scope(0.1);
  const Decision decision = route(kEasyText, &low, *hand);
  EXPECT_EQ(decision.route, Route::cloud_small);
  EXPECT_EQ(decision.reason, Reason::low_confidence);
  EXPECT_FALSE(decision.figures.contains("complexity_score"));
}

TEST_F(DecideWithComplexityModelTest, APolicyNamingAMissingModelIsRefused) {
  auto policy = parse_router_policy("", "test-policy.yaml", "", (*dir_ / "nope").string());
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.error().code, "config_invalid");
  EXPECT_NE(policy.error().message.find("routing.complexity_model"), std::string::npos);
}

TEST_F(DecideWithComplexityModelTest, ConfigValidatesTheKey) {
  auto good = load_config_text("routing:\n  complexity_model: " + (*dir_ / "complexity").string() + "\n",
                               "cx.yaml");
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(good->routing.complexity_model, (*dir_ / "complexity").string());
  EXPECT_TRUE(load_config_text("", "empty.yaml")->routing.complexity_model.empty());
  for (const std::string& bad : {std::string("\" \""), (*dir_ / "nope").string()}) {
    auto config = load_config_text("routing:\n  complexity_model: " + bad + "\n", "cx.yaml");
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_NE(config.error().message.find("routing.complexity_model"), std::string::npos)
        << config.error().message;
  }
}

}  // namespace
}  // namespace hengshi::router

namespace hengshi::router {
namespace {

TEST(ComplexitySourceTest, ReadsAnOptionalWeightAfterTheLastColon) {
  EXPECT_EQ(parse_complexity_source("rows.jsonl")->weight, 1.0);
  auto weighted = parse_complexity_source("mine/rows.jsonl:5");
  ASSERT_TRUE(weighted.ok());
  EXPECT_EQ(weighted->path, "mine/rows.jsonl");
  EXPECT_EQ(weighted->weight, 5.0);
  EXPECT_EQ(parse_complexity_source("a:b/rows.jsonl")->path, "a:b/rows.jsonl");  // not a number: a path
  EXPECT_FALSE(parse_complexity_source("rows.jsonl:0").ok());
  EXPECT_FALSE(parse_complexity_source("rows.jsonl:-2").ok());
  EXPECT_FALSE(parse_complexity_source(":3").ok());
}

// Rows of a deployment whose hard questions are the *short* ones: the opposite of the public set.
std::vector<ComplexityRow> inverted_rows(std::size_t per_class, std::uint64_t seed) {
  std::vector<ComplexityRow> rows = generated_rows(per_class, seed);
  for (auto& row : rows) row.hard = !row.hard;
  return rows;
}

fs::path write_named(const fs::path& dir, const std::string& name, const std::vector<ComplexityRow>& rows) {
  const fs::path file = dir / name;
  std::ofstream out(file);
  for (const auto& row : rows) out << nlohmann::json{{"text", row.text}, {"small_correct", !row.hard}}.dump() << "\n";
  return file;
}

TEST(ComplexityModelDirTest, SeveralFilesWithWeightsAndTheManifestNamesEach) {
  const fs::path dir = scratch_dir("weighted");
  const fs::path public_rows = write_named(dir, "public.jsonl", generated_rows(100, 11));
  const fs::path own_rows = write_named(dir, "own.jsonl", inverted_rows(20, 12));
  ComplexityTrainOptions options;

  // Weight 1 on one file is the single-file model exactly.
  auto single = train_complexity_directory(public_rows.string(), dir / "single", options);
  auto listed = train_complexity_directory(std::vector<ComplexitySource>{{public_rows.string(), 1.0}}, dir / "listed", options);
  ASSERT_TRUE(single.ok() && listed.ok());
  EXPECT_DOUBLE_EQ(single->model->score(kHardText, 1), listed->model->score(kHardText, 1));

  // 40 of the deployment's rows at weight 1 barely move the public model; at weight 20 they
  // outweigh its 200 rows and the score turns around.
  auto light = train_complexity_directory(
      std::vector<ComplexitySource>{{public_rows.string(), 1.0}, {own_rows.string(), 1.0}}, dir / "light", options);
  auto heavy = train_complexity_directory(
      std::vector<ComplexitySource>{{public_rows.string(), 1.0}, {own_rows.string(), 20.0}}, dir / "heavy", options);
  ASSERT_TRUE(light.ok()) << light.error().message;
  ASSERT_TRUE(heavy.ok()) << heavy.error().message;
  EXPECT_GT(light->model->score(kHardText, 1), light->model->score(kEasyText, 1));
  EXPECT_LT(heavy->model->score(kHardText, 1), heavy->model->score(kEasyText, 1));

  std::ifstream manifest_in(dir / "heavy" / "manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_in);
  const auto& data = manifest["training"]["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[1]["path"], own_rows.string());
  EXPECT_EQ(data[1]["weight"], 20.0);
  EXPECT_EQ(data[1]["rows"], 40);
  EXPECT_EQ(data[1]["xxh64"].get<std::string>().size(), 16u);
  EXPECT_EQ(manifest["training"]["rows"], 240);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hengshi::router
