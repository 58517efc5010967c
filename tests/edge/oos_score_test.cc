#include "edge/oos_score.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "edge/intent_engine.h"
#include "edge/intent_trainer.h"
#include "edge/model_manifest.h"
#include "support/child_process.h"
#include "support/shared_model.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class OosScoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = fs::temp_directory_path() / ("hengshi-oos-score-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(std::random_device{}()));
    fs::create_directories(work_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(work_, ec);
  }

  // The small FAQ fixture (4 intents, 10 __oos__ rows), first grid point, trained once per build
  // (support/shared_model.h); a copy of it in the test's own folder, which the test may change.
  fs::path small_model() const {
    const auto shared = testing::shared_small_intent_model();
    EXPECT_TRUE(shared.ok) << shared.output;
    // The trainer's report says it fitted the score (`hengshi train` prints it).
    EXPECT_NE(shared.output.find("out-of-scope score: "), std::string::npos) << shared.output;
    EXPECT_EQ(shared.output.find("out-of-scope score: none"), std::string::npos) << shared.output;
    const fs::path copy = work_ / "model";
    if (shared.ok) fs::copy(shared.dir, copy, fs::copy_options::recursive);
    return copy;
  }

  fs::path work_;
};

TEST(OosAurocTest, SeparatesRanksAndCountsTiesAsHalf) {
  EXPECT_DOUBLE_EQ(auroc({0.1, 0.2, 0.8, 0.9}, {false, false, true, true}), 1.0);
  EXPECT_DOUBLE_EQ(auroc({0.1, 0.2, 0.8, 0.9}, {true, true, false, false}), 0.0);
  EXPECT_DOUBLE_EQ(auroc({0.5, 0.5}, {true, false}), 0.5);
  // One of the two positives outranks the single negative, one ties with it: (1 + 0.5) / 2.
  EXPECT_DOUBLE_EQ(auroc({0.3, 0.9, 0.3}, {true, true, false}), 0.75);
  EXPECT_DOUBLE_EQ(auroc({0.3, 0.9}, {true, true}), 0.5);  // one class only
}

// Features: neighbour similarity separates the classes, the margin is noise.
std::vector<OosExample> synthetic_examples() {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.1);
  std::vector<OosExample> examples;
  for (int i = 0; i < 200; ++i) {
    OosExample e;
    e.in_scope = i % 2 == 0;
    e.features[static_cast<std::size_t>(OosFeature::kNeighbourSimilarity)] =
        (e.in_scope ? 0.8 : 0.4) + noise(rng);
    e.features[static_cast<std::size_t>(OosFeature::kMargin)] = 0.5 + noise(rng);
    examples.push_back(e);
  }
  return examples;
}

TEST(OosScorerTest, LogisticFitFollowsTheSeparatingFeatureAndStatesThePrior) {
  OosFitOptions options;
  options.features = {OosFeature::kNeighbourSimilarity, OosFeature::kMargin};
  options.assumed_oos_share = 0.5;
  const OosScorer scorer =
      OosScorer::fit(synthetic_examples(), options, NeighbourIndex(), IntentCentroids(), {});
  OosFeatures near{};
  near[static_cast<std::size_t>(OosFeature::kNeighbourSimilarity)] = 0.85;
  near[static_cast<std::size_t>(OosFeature::kMargin)] = 0.5;
  OosFeatures far = near;
  far[static_cast<std::size_t>(OosFeature::kNeighbourSimilarity)] = 0.35;
  OosFeatures middle = near;
  middle[static_cast<std::size_t>(OosFeature::kNeighbourSimilarity)] = 0.6;
  EXPECT_GT(scorer.in_scope(near), 0.95);
  EXPECT_LT(scorer.in_scope(far), 0.05);
  EXPECT_NEAR(scorer.in_scope(middle), 0.5, 0.15);  // the midpoint, at an even prior
  EXPECT_GT(scorer.fit_info()["auroc"]["neighbour_similarity"].get<double>(), 0.95);
  EXPECT_GT(scorer.fit_info()["auroc"]["combined"].get<double>(), 0.95);

  // The assumed out-of-scope share moves P(in scope) at the same features: less out-of-scope
  // traffic raises it, more lowers it.
  options.assumed_oos_share = 0.3;
  const OosScorer less_oos =
      OosScorer::fit(synthetic_examples(), options, NeighbourIndex(), IntentCentroids(), {});
  EXPECT_GT(less_oos.in_scope(middle), scorer.in_scope(middle));
  options.assumed_oos_share = 0.7;
  const OosScorer more_oos =
      OosScorer::fit(synthetic_examples(), options, NeighbourIndex(), IntentCentroids(), {});
  EXPECT_LT(more_oos.in_scope(middle), scorer.in_scope(middle));
}

TEST_F(OosScoreTest, SaveAndLoadGiveTheSameScores) {
  // Three training "sentence vectors" of dim 4, intents 0, 0, 1.
  const std::vector<float> vectors = {1, 0, 0, 0, 0.9f, 0.1f, 0, 0, 0, 0, 1, 0};
  OosFitOptions options;
  options.features = {OosFeature::kNeighbourSimilarity, OosFeature::kMargin};
  const OosScorer scorer =
      OosScorer::fit(synthetic_examples(), options, NeighbourIndex::build(4, vectors, {0, 0, 1}),
                     IntentCentroids::build(4, vectors, {0, 0, 1}, 2), {});
  ASSERT_TRUE(scorer.save(work_));
  auto loaded = OosScorer::load(work_, /*labels=*/2, /*dim=*/4);
  ASSERT_TRUE(loaded) << loaded.error().message;

  const std::vector<double> logits = {2.0, 0.5};
  const std::vector<float> query = {0.95f, 0.05f, 0.0f, 0.0f};
  const OosFeatures before = scorer.features(logits, 0, query);
  const OosFeatures after = loaded->features(logits, 0, query);
  EXPECT_EQ(before, after);
  EXPECT_NEAR(after[static_cast<std::size_t>(OosFeature::kNeighbourSimilarity)], 0.9986, 1e-3);
  EXPECT_NEAR(after[static_cast<std::size_t>(OosFeature::kNeighbourAgreement)], 2.0 / 3.0, 1e-9);
  EXPECT_DOUBLE_EQ(scorer.in_scope(before), loaded->in_scope(after));
  // Intent 0's centroid lies between its two rows; the query is about as close as they are.
  EXPECT_GT(after[static_cast<std::size_t>(OosFeature::kCentroidSimilarity)], 0.99);
  EXPECT_GT(after[static_cast<std::size_t>(OosFeature::kCentroidZ)], -1.0);
  // Far from intent 1's only row: centroid similarity 0, many spreads below its rows'.
  const OosFeatures other = loaded->features(logits, 1, query);
  EXPECT_NEAR(other[static_cast<std::size_t>(OosFeature::kCentroidSimilarity)], 0.0, 1e-6);
  EXPECT_LT(other[static_cast<std::size_t>(OosFeature::kCentroidZ)], -10.0);

  // A score file for another model's shape is refused, naming the field.
  auto wrong_dim = OosScorer::load(work_, 2, 8);
  ASSERT_FALSE(wrong_dim);
  EXPECT_NE(wrong_dim.error().message.find("\"dim\""), std::string::npos);
  auto wrong_labels = OosScorer::load(work_, 1, 4);
  ASSERT_FALSE(wrong_labels);
  EXPECT_NE(wrong_labels.error().message.find("neighbour_intents"), std::string::npos);
}

TEST_F(OosScoreTest, StandInOutOfScopeRowsRoundTripAndABadBlockIsRefused) {
  const std::vector<float> vectors = {1, 0, 0, 0, 0, 0, 1, 0};
  OosFitOptions options;
  options.features = {OosFeature::kMargin};
  OosScorer scorer =
      OosScorer::fit(synthetic_examples(), options, NeighbourIndex::build(4, vectors, {0, 1}),
                     IntentCentroids::build(4, vectors, {0, 1}, 2), {});
  scorer.set_synthetic_out_of_scope({{"refund", 0.123456}, {"hours", 1.0}, {"refund", 0.0}});
  ASSERT_TRUE(scorer.save(work_));
  auto loaded = OosScorer::load(work_, 2, 4);
  ASSERT_TRUE(loaded) << loaded.error().message;
  const std::vector<SyntheticOosRow>& rows = loaded->synthetic_out_of_scope();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].intent, "refund");
  EXPECT_DOUBLE_EQ(rows[0].confidence, 0.1235);  // four decimals
  EXPECT_EQ(rows[1].intent, "hours");
  EXPECT_DOUBLE_EQ(rows[1].confidence, 1.0);

  // A confidence outside [0, 1], or arrays of different lengths, name the block.
  std::ifstream in(work_ / kOosScoreFile);
  nlohmann::json json = nlohmann::json::parse(in);
  in.close();
  for (const nlohmann::json& bad :
       {nlohmann::json{{"intents", {"refund"}}, {"confidence", {1.5}}},
        nlohmann::json{{"intents", {"refund", "hours"}}, {"confidence", {0.5}}},
        nlohmann::json{{"intents", {7}}, {"confidence", {0.5}}}, nlohmann::json("rows")}) {
    json["synthetic_out_of_scope"] = bad;
    std::ofstream(work_ / kOosScoreFile, std::ios::trunc) << json.dump();
    auto refused = OosScorer::load(work_, 2, 4);
    ASSERT_FALSE(refused) << bad.dump();
    EXPECT_NE(refused.error().message.find("synthetic_out_of_scope"), std::string::npos)
        << refused.error().message;
  }
  // A file without the block (written before it existed) loads with none.
  json.erase("synthetic_out_of_scope");
  std::ofstream(work_ / kOosScoreFile, std::ios::trunc) << json.dump();
  auto older = OosScorer::load(work_, 2, 4);
  ASSERT_TRUE(older) << older.error().message;
  EXPECT_TRUE(older->synthetic_out_of_scope().empty());
}

TEST_F(OosScoreTest, TrainingKeepsOneStandInPerHeldOutIntentRow) {
  const fs::path dir = small_model();
  auto engine = IntentEngine::load(dir);
  ASSERT_TRUE(engine) << engine.error().message;
  const OosScorer* scorer = (*engine)->oos_scorer();
  ASSERT_NE(scorer, nullptr);
  const nlohmann::json& from = scorer->fit_info()["negatives_from"];
  const std::vector<SyntheticOosRow>& rows = scorer->synthetic_out_of_scope();
  EXPECT_EQ(rows.size(), from["held_out_intent_rows"].get<std::size_t>());
  ASSERT_FALSE(rows.empty());
  std::set<std::string> held_out;
  for (const auto& intent : from["held_out_intents"]) held_out.insert(intent.get<std::string>());
  const std::vector<std::string>& labels = (*engine)->labels();
  for (const SyntheticOosRow& row : rows) {
    // Predicted by a model that never saw the row's intent: one of the others, never __oos__.
    EXPECT_NE(std::find(labels.begin(), labels.end(), row.intent), labels.end()) << row.intent;
    EXPECT_FALSE(held_out.contains(row.intent)) << row.intent;
    EXPECT_NE(row.intent, kOutOfScopeIntent);
    EXPECT_GE(row.confidence, 0.0);
    EXPECT_LE(row.confidence, 1.0);
  }
}

TEST_F(OosScoreTest, LowForGibberishAndUnseenTopicsHighForTrainingLikeText) {
  const fs::path dir = small_model();
  auto engine = IntentEngine::load(dir);
  ASSERT_TRUE(engine) << engine.error().message;
  ASSERT_NE((*engine)->oos_scorer(), nullptr);

  double lowest_in_scope = 1.0;
  for (const char* text : {"where is my order", "I want a refund", "I forgot my password",
                           "what are your opening hours", "怎么申请退款"}) {
    const IntentPrediction p = (*engine)->predict(text);
    lowest_in_scope = std::min(lowest_in_scope, p.in_scope);
    EXPECT_DOUBLE_EQ(p.confidence, p.intent_confidence * p.in_scope) << text;
  }
  double highest_out = 0.0;
  for (const char* text : {"zxqv blorf wibble snark", "qwrtpl mnbvc", "the mitochondria of a cell",
                           "who won the football world cup"}) {
    const IntentPrediction p = (*engine)->predict(text);
    highest_out = std::max(highest_out, p.in_scope);
  }
  EXPECT_GT(lowest_in_scope, 0.5);
  EXPECT_LT(highest_out, 0.5);
  EXPECT_GT(lowest_in_scope, highest_out);
}

TEST_F(OosScoreTest, ManifestListsTheScoreAndDetectsTampering) {
  const fs::path dir = small_model();
  auto manifest = load_verified_manifest(dir);
  ASSERT_TRUE(manifest) << manifest.error().message;
  std::set<std::string> names;
  for (const ManifestFile& f : manifest->files) names.insert(f.name);
  EXPECT_TRUE(names.contains(std::string(kOosScoreFile)));
  EXPECT_TRUE(names.contains(std::string(kOosNeighboursFile)));
  EXPECT_EQ(manifest->holdout_metrics["oos_score"]["file"], std::string(kOosScoreFile));

  for (std::string_view name : {kOosScoreFile, kOosNeighboursFile}) {
    const fs::path copy = work_ / ("tampered-" + std::string(name));
    fs::copy(dir, copy, fs::copy_options::recursive);
    std::ofstream(copy / name, std::ios::app) << " ";
    auto engine = IntentEngine::load(copy);
    ASSERT_FALSE(engine) << name;
    EXPECT_EQ(engine.error().code, "model_invalid");
    EXPECT_NE(engine.error().message.find(std::string(name)), std::string::npos)
        << engine.error().message;
  }
}

TEST_F(OosScoreTest, ModelDirectoryWithoutTheScoreLoadsAsBefore) {
  const fs::path dir = small_model();
  auto with_score = IntentEngine::load(dir);
  ASSERT_TRUE(with_score) << with_score.error().message;

  // An older directory: no score files, a manifest that does not list them.
  auto manifest = load_verified_manifest(dir);
  ASSERT_TRUE(manifest);
  std::erase_if(manifest->files, [](const ManifestFile& f) {
    return f.name == kOosScoreFile || f.name == kOosNeighboursFile;
  });
  manifest->holdout_metrics.erase("oos_score");
  fs::remove(dir / kOosScoreFile);
  fs::remove(dir / kOosNeighboursFile);
  ASSERT_TRUE(write_manifest(dir, *manifest));

  auto old = IntentEngine::load(dir);
  ASSERT_TRUE(old) << old.error().message;
  EXPECT_EQ((*old)->oos_scorer(), nullptr);
  EXPECT_FALSE((*old)->oos_features("where is my order"));
  for (const char* text : {"where is my order", "zxqv blorf wibble snark"}) {
    const IntentPrediction before = (*with_score)->predict(text);
    const IntentPrediction now = (*old)->predict(text);
    EXPECT_EQ(now.intent, before.intent) << text;
    EXPECT_DOUBLE_EQ(now.in_scope, 1.0);
    EXPECT_DOUBLE_EQ(now.confidence, now.intent_confidence);
    EXPECT_DOUBLE_EQ(now.intent_confidence, before.intent_confidence);
  }

  // Listing the score without its neighbour index is refused.
  const fs::path half = work_ / "half";
  fs::copy(dir, half, fs::copy_options::recursive);
  std::ofstream(half / kOosScoreFile) << "{}";
  auto half_manifest = load_verified_manifest(half);
  ASSERT_TRUE(half_manifest);
  auto file = describe_file(half, kOosScoreFile);
  ASSERT_TRUE(file);
  half_manifest->files.push_back(*file);
  ASSERT_TRUE(write_manifest(half, *half_manifest));
  auto refused = IntentEngine::load(half);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find(std::string(kOosNeighboursFile)), std::string::npos);
}

}  // namespace
}  // namespace hengshi::edge
