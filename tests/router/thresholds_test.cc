#include "router/thresholds.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>

#include "router/threshold_fit.h"

#include "support/text_checks.h"

namespace hengshi::router {
namespace {

using testing::contains;  // support/text_checks.h

ThresholdsFile sample_file() {
  ThresholdsFile file;
  file.version = "thr-20261129T190000Z-0badf00d";
  file.model_version = "intent-2026-11-01";
  file.target_precision = 0.97;
  file.default_band = Band{0.9, 0.4};
  file.task_types = {{"faq", Band{0.8, 0.3}}, {"chitchat", Band{0.7, 0.2}}};
  file.intents = {{"refund", Band{0.95, 0.6}}};
  file.task_intents = {{"faq/refund", Band{0.99, 0.7}}, {"faq/hours", Band{1.01, 0.5}}};
  file.notes = {{"intents.refund", "fitted on 412 samples"}};
  return file;
}

Thresholds sample_thresholds() {
  auto thresholds = Thresholds::create(sample_file());
  EXPECT_TRUE(thresholds.ok());
  return thresholds.value();
}

void expect_band(const Band& band, double high, double low) {
  EXPECT_DOUBLE_EQ(band.high, high);
  EXPECT_DOUBLE_EQ(band.low, low);
}

TEST(ThresholdsTest, BandPrecedence) {
  const auto thresholds = sample_thresholds();
  expect_band(thresholds.band("faq", "refund"), 0.99, 0.7);       // task/intent
  expect_band(thresholds.band("chitchat", "refund"), 0.95, 0.6);  // intent
  expect_band(thresholds.band("faq", "greeting"), 0.8, 0.3);      // task type
  expect_band(thresholds.band("poetry", "greeting"), 0.9, 0.4);   // default
  expect_band(thresholds.band("", "refund"), 0.95, 0.6);          // no task: intent level
  expect_band(thresholds.band("faq", ""), 0.8, 0.3);              // no intent: task level
  expect_band(thresholds.band("", ""), 0.9, 0.4);
  expect_band(Thresholds().band("faq", "refund"), 0.85, 0.5);  // built-in default
}

TEST(ThresholdsTest, ClassifiesAgainstTheBand) {
  const auto thresholds = sample_thresholds();
  EXPECT_EQ(thresholds.classify(0.8, "faq", "greeting"), ConfidenceLevel::high);  // >= high
  EXPECT_EQ(thresholds.classify(0.79, "faq", "greeting"), ConfidenceLevel::middle);
  EXPECT_EQ(thresholds.classify(0.3, "faq", "greeting"), ConfidenceLevel::middle);  // >= low
  EXPECT_EQ(thresholds.classify(0.29, "faq", "greeting"), ConfidenceLevel::low);
  EXPECT_EQ(thresholds.classify(NAN, "faq", "greeting"), ConfidenceLevel::low);
  // high 1.01: the edge never answers, even at confidence 1.
  EXPECT_EQ(thresholds.classify(1.0, "faq", "hours"), ConfidenceLevel::middle);
  EXPECT_EQ(to_string(ConfidenceLevel::middle), "middle");
}

TEST(ThresholdsTest, ValidationNamesSourceAndField) {
  auto file = sample_file();
  file.intents["refund"].high = 1.5;
  auto result = Thresholds::create(file, "thr.json");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, "config_invalid");
  EXPECT_TRUE(contains(result.error().message, "thr.json: intents.refund.high: must be"))
      << result.error().message;

  file = sample_file();
  file.task_types["faq"].low = 0.9;  // above high 0.8
  result = Thresholds::create(file, "thr.json");
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().message, "thr.json: task_types.faq.low:"));

  file = sample_file();
  file.default_band.low = -0.1;
  result = Thresholds::create(file);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().message, "thresholds: default_band.low:"));

  file = sample_file();
  file.task_intents["refund"] = Band{};
  result = Thresholds::create(file);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().message, "task_intents.refund:"));

  file = sample_file();
  file.target_precision = 0;
  result = Thresholds::create(file);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(contains(result.error().message, "target_precision:"));

  file = sample_file();
  file.intents["refund"].high = NAN;
  EXPECT_FALSE(Thresholds::create(file).ok());

  file = sample_file();
  file.version.clear();
  EXPECT_FALSE(Thresholds::create(file).ok());

  file = sample_file();
  file.default_band = Band{1.01, 1.01};  // edge never, cloud-large always: legal
  EXPECT_TRUE(Thresholds::create(file).ok());
}

TEST(ThresholdsTest, JsonRoundTripIsStable) {
  const auto file = sample_file();
  const std::string text = thresholds_to_json(file);
  EXPECT_EQ(text.rfind("{\n  \"format\": \"hengshi-thresholds\",\n  \"format_version\": 1,", 0), 0u)
      << text;
  auto parsed = parse_thresholds_json(text, "mem");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->version, file.version);
  EXPECT_EQ(parsed->model_version, file.model_version);
  EXPECT_DOUBLE_EQ(parsed->target_precision, file.target_precision);
  expect_band(parsed->default_band, 0.9, 0.4);
  ASSERT_EQ(parsed->task_types.size(), 2u);
  expect_band(parsed->task_types.at("chitchat"), 0.7, 0.2);
  expect_band(parsed->intents.at("refund"), 0.95, 0.6);
  expect_band(parsed->task_intents.at("faq/hours"), 1.01, 0.5);
  EXPECT_EQ(parsed->notes, file.notes);
  EXPECT_EQ(thresholds_to_json(*parsed), text);  // same content, same bytes
}

TEST(ThresholdsTest, ParseRefusesUnknownFormatAndBadFields) {
  const auto parse_error = [](const std::string& text) {
    auto result = parse_thresholds_json(text, "t.json");
    EXPECT_FALSE(result.ok()) << text;
    return result.ok() ? std::string() : result.error().code + " " + result.error().message;
  };
  EXPECT_TRUE(contains(parse_error("not json"), "t.json: invalid JSON"));
  EXPECT_TRUE(contains(parse_error("[]"), "not a JSON object"));
  EXPECT_TRUE(contains(parse_error(R"({"format":"other","format_version":1})"),
                       "t.json: format: unknown format \"other\""));
  EXPECT_TRUE(contains(parse_error(R"({"format":"hengshi-thresholds","format_version":2,"x":1})"),
                       "t.json: format_version: unsupported version 2"));
  EXPECT_TRUE(contains(parse_error(R"({"format_version":1})"), "format: is required"));

  // Field errors, made by editing a valid file's text.
  const std::string valid = thresholds_to_json(sample_file());
  const auto edited = [&](std::string_view from, std::string_view to) {
    std::string text = valid;
    const auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  EXPECT_TRUE(
      contains(parse_error(edited("\"notes\"", "\"nots\"")), "t.json: nots: unknown field"));
  EXPECT_TRUE(
      contains(parse_error(edited("\"default_band\"", "\"default\"")), "default: unknown field"));
  EXPECT_TRUE(contains(parse_error(edited("\"high\": 0.95", "\"hihg\": 0.95")),
                       "t.json: intents.refund.hihg: unknown field"));
  EXPECT_TRUE(contains(parse_error(edited("\"high\": 0.95", "\"high\": \"0.95\"")),
                       "t.json: intents.refund.high: must be a number"));
  EXPECT_TRUE(contains(parse_error(edited("\"high\": 0.95", "\"high\": 1.2")),
                       "t.json: intents.refund.high: must be in [0, 1.01]"));
  EXPECT_TRUE(contains(
      parse_error(edited("\"version\": \"thr-20261129T190000Z-0badf00d\"", "\"version\": 7")),
      "t.json: version: must be a string"));
  EXPECT_TRUE(contains(parse_error(edited("\"fitted on 412 samples\"", "5")),
                       "t.json: notes.intents.refund: must be a string"));
  EXPECT_TRUE(contains(parse_error(edited("\"faq/refund\"", "\"faq/refund/x\"")),
                       "t.json: task_intents.faq/refund/x: key must be"));
  EXPECT_TRUE(contains(parse_error(R"({"format":"hengshi-thresholds","format_version":1,
      "version":"v","model_version":"m","target_precision":0.97})"),
                       "t.json: default_band: is required"));
  EXPECT_TRUE(contains(parse_error(R"({"format":"hengshi-thresholds","format_version":1.0})"),
                       "format_version: must be an integer"));
}

TEST(ThresholdsTest, OptionalMapsMayBeAbsent) {
  auto parsed = parse_thresholds_json(R"({"format":"hengshi-thresholds","format_version":1,
      "version":"v1","model_version":"","target_precision":0.9,
      "default_band":{"high":0.8,"low":0.4}})",
                                      "t.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(parsed->intents.empty());
  EXPECT_TRUE(parsed->notes.empty());
  expect_band(parsed->default_band, 0.8, 0.4);
}

class ThresholdsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hengshi_thresholds_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ThresholdsFileTest, WriteThenLoad) {
  const std::string path = (dir_ / "thresholds.json").string();
  ASSERT_TRUE(write_thresholds_file(sample_file(), path).ok());
  auto loaded = load_thresholds_file(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(thresholds_to_json(*loaded), thresholds_to_json(sample_file()));
  // Overwrite in place; no staging file is left behind.
  auto second = sample_file();
  second.version = "thr-2";
  ASSERT_TRUE(write_thresholds_file(second, path).ok());
  EXPECT_EQ(load_thresholds_file(path)->version, "thr-2");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(ThresholdsFileTest, RefusesToWriteAnInvalidFileAndReportsMissingFiles) {
  const std::string path = (dir_ / "bad.json").string();
  auto file = sample_file();
  file.intents["refund"].low = 2;
  const auto status = write_thresholds_file(file, path);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(contains(status.error().message, path + ": intents.refund.low:"));
  EXPECT_FALSE(std::filesystem::exists(path));

  const auto missing = load_thresholds_file((dir_ / "missing.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "config_unreadable");

  std::ofstream(dir_ / "broken.json") << R"({"format":"hengshi-thresholds","format_version":9})";
  const auto broken = load_thresholds_file((dir_ / "broken.json").string());
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(contains(broken.error().message, "broken.json: format_version:"));
}

TEST(ThresholdsTest, VersionNamesTimeAndContent) {
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1795978800));
  auto file = sample_file();
  const std::string version = make_thresholds_version(file, now);
  EXPECT_TRUE(std::regex_match(version, std::regex("thr-\\d{8}T\\d{6}Z-[0-9a-f]{8}"))) << version;
  EXPECT_EQ(version.substr(0, 21), "thr-20261129T190000Z-");
  file.version = "something else";  // the version field itself is not hashed
  EXPECT_EQ(make_thresholds_version(file, now), version);
  file.intents["refund"].high = 0.96;
  EXPECT_NE(make_thresholds_version(file, now).substr(21), version.substr(21));
}

// --- fit_band ---

// `count` predictions at `confidence`, `passes` of them right; the rest predict "other".
void add_task_rows(std::vector<LabelledPrediction>& rows, double confidence, int count, int passes,
              const std::string& task = "faq") {
  for (int i = 0; i < count; ++i) {
    rows.push_back(
        LabelledPrediction{task, "refund", i < passes ? "refund" : "hours", confidence, false});
  }
}

double share_sum(const FitResult& fit) {
  return std::accumulate(fit.buckets.begin(), fit.buckets.end(), 0.0,
                         [](double sum, const BucketRow& row) { return sum + row.share; });
}

TEST(FitBandTest, EdgePassDefinition) {
  EXPECT_TRUE(is_edge_pass({"faq", "refund", "refund", 0.9, false}));
  EXPECT_FALSE(is_edge_pass({"faq", "refund", "hours", 0.9, false}));
  EXPECT_FALSE(is_edge_pass({"faq", "refund", "refund", 0.9, true}));  // not answered
  EXPECT_FALSE(is_edge_pass({"faq", "__oos__", "__oos__", 0.9, false}));
  EXPECT_FALSE(is_answered({"faq", "refund", "__oos__", 0.9, false}));
  EXPECT_TRUE(is_answered({"faq", "__oos__", "refund", 0.9, false}));  // a failure when answered
}

TEST(FitBandTest, PicksTheLowestThresholdMeetingTheTarget) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 0.95, 100, 100);
  add_task_rows(rows, 0.85, 100, 95);  // cumulative 195/200 = 0.975
  add_task_rows(rows, 0.75, 100, 80);  // cumulative 275/300 < 0.97
  for (int i = 0; i < 50; ++i) rows.push_back({"faq", "__oos__", "__oos__", 0.2, true});
  const FitResult fit = fit_band(rows, 0.97);
  EXPECT_TRUE(fit.reachable);
  EXPECT_DOUBLE_EQ(fit.high, 0.85);
  EXPECT_DOUBLE_EQ(fit.precision_at_high, 0.975);
  EXPECT_DOUBLE_EQ(fit.coverage_at_high, 200.0 / 350.0);
  EXPECT_TRUE(fit.monotonic);
  EXPECT_TRUE(fit.note.empty()) << fit.note;
  EXPECT_EQ(fit.samples, 350u);
  ASSERT_EQ(fit.buckets.size(), 10u);
  EXPECT_NEAR(share_sum(fit), 1.0, 1e-12);
  EXPECT_EQ(fit.buckets[9].samples, 100u);
  EXPECT_EQ(fit.buckets[2].samples, 50u);
  EXPECT_EQ(fit.buckets[2].answered, 0u);  // predicted out of scope
  EXPECT_DOUBLE_EQ(fit.buckets[8].pass_rate, 0.95);
  EXPECT_LE(fit.low, fit.high);
}

TEST(FitBandTest, LowestQualifyingThresholdNotTheFirstCrossing) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 0.95, 100, 100);  // 1.0: qualifies
  add_task_rows(rows, 0.93, 10, 5);     // 105/110: fails
  add_task_rows(rows, 0.91, 200, 200);  // 305/310 = 0.984: qualifies again, lower
  add_task_rows(rows, 0.5, 50, 10);
  const FitResult fit = fit_band(rows, 0.97);
  EXPECT_DOUBLE_EQ(fit.high, 0.91);
  EXPECT_NEAR(fit.precision_at_high, 305.0 / 310.0, 1e-12);
}

TEST(FitBandTest, UnreachableTargetDisablesTheEdge) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 0.9, 200, 150);
  add_task_rows(rows, 0.6, 200, 100);
  const FitResult fit = fit_band(rows, 0.97);
  EXPECT_FALSE(fit.reachable);
  EXPECT_DOUBLE_EQ(fit.high, kEdgeNever);
  EXPECT_EQ(fit.coverage_at_high, 0.0);
  EXPECT_TRUE(contains(fit.note, "unreachable")) << fit.note;
  EXPECT_LE(fit.low, fit.high);

  // Perfect but too few answers to trust.
  std::vector<LabelledPrediction> few;
  add_task_rows(few, 0.99, 10, 10);
  const FitResult small = fit_band(few, 0.97, 20);
  EXPECT_FALSE(small.reachable);
  EXPECT_DOUBLE_EQ(small.high, kEdgeNever);
  EXPECT_DOUBLE_EQ(small.low, 0.5);  // not enough data for low either
  EXPECT_NEAR(share_sum(small), 1.0, 1e-12);

  const FitResult empty = fit_band({}, 0.97);
  EXPECT_FALSE(empty.reachable);
  EXPECT_EQ(empty.samples, 0u);
  EXPECT_EQ(share_sum(empty), 0.0);
}

TEST(FitBandTest, NonMonotonicTopBucketUnderTargetDisablesTheEdge) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 0.95, 100, 91);   // top bucket 0.91
  add_task_rows(rows, 0.85, 400, 392);  // 0.98 below; cumulative 483/500 = 0.966 meets 0.96
  const FitResult fit = fit_band(rows, 0.96);
  EXPECT_TRUE(fit.reachable);  // the search alone would answer from 0.85
  EXPECT_FALSE(fit.monotonic);
  EXPECT_DOUBLE_EQ(fit.high, kEdgeNever);
  EXPECT_EQ(fit.coverage_at_high, 0.0);
  EXPECT_TRUE(contains(fit.note, "non_monotonic: top bucket [0.9, 1.0] pass rate 0.910 < 0.980"))
      << fit.note;
  EXPECT_TRUE(contains(fit.note, "edge disabled")) << fit.note;
}

TEST(FitBandTest, NonMonotonicTopBucketAboveTargetIsKept) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 0.95, 200, 195);  // 0.975, dips 0.025 under the bucket below
  add_task_rows(rows, 0.85, 200, 200);
  const FitResult fit = fit_band(rows, 0.97);
  EXPECT_FALSE(fit.monotonic);
  EXPECT_DOUBLE_EQ(fit.high, 0.85);
  EXPECT_TRUE(contains(fit.note, "threshold kept")) << fit.note;

  // A dip within the tolerance is not flagged.
  std::vector<LabelledPrediction> close;
  add_task_rows(close, 0.95, 100, 99);
  add_task_rows(close, 0.85, 100, 100);
  EXPECT_TRUE(fit_band(close, 0.97).monotonic);

  // Unsupported buckets are skipped by the check.
  std::vector<LabelledPrediction> sparse;
  add_task_rows(sparse, 0.95, 5, 0);
  add_task_rows(sparse, 0.85, 100, 100);
  const FitResult sparse_fit = fit_band(sparse, 0.9);
  EXPECT_TRUE(sparse_fit.monotonic);
  EXPECT_DOUBLE_EQ(sparse_fit.high, 0.85);  // 100/105 = 0.952 >= 0.9
}

TEST(FitBandTest, LowIsWhereThePredictedIntentBecomesMostlyRight) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 0.2, 50, 10);
  add_task_rows(rows, 0.4, 50, 40);
  add_task_rows(rows, 0.9, 100, 100);
  const FitResult fit = fit_band(rows, 0.97);
  EXPECT_DOUBLE_EQ(fit.high, 0.9);
  EXPECT_DOUBLE_EQ(fit.low, 0.4);

  // Confident out-of-scope predictions that are wrong pull the fitted accuracy under one half
  // everywhere: low would be 1.01, clamped to high.
  std::vector<LabelledPrediction> clamp;
  add_task_rows(clamp, 0.3, 100, 100);
  for (int i = 0; i < 300; ++i) clamp.push_back({"faq", "refund", "__oos__", 0.6, true});
  const FitResult clamped = fit_band(clamp, 0.97);
  EXPECT_DOUBLE_EQ(clamped.high, 0.3);
  EXPECT_DOUBLE_EQ(clamped.low, 0.3);
}

TEST(FitBandTest, ConfidenceOneLandsInTheLastBucket) {
  std::vector<LabelledPrediction> rows;
  add_task_rows(rows, 1.0, 30, 30);
  add_task_rows(rows, 1.7, 10, 10);  // clamped
  const FitResult fit = fit_band(rows, 0.97);
  EXPECT_EQ(fit.buckets[9].samples, 40u);
  EXPECT_DOUBLE_EQ(fit.high, 1.0);
}

}  // namespace
}  // namespace hengshi::router
