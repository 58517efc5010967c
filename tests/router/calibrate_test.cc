#include "router/calibrate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "edge/intent_trainer.h"
#include "support/child_process.h"
#include "support/shared_model.h"

#include "support/text_checks.h"

namespace hengshi::router {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() { return testing::source_path(""); }

fs::path fixture(const std::string& name) { return source_dir() / "tests/edge/fixtures" / name; }

using testing::contains;  // support/text_checks.h

// A fixed clock, so two calibrations of the same rows give the same file byte for byte.
std::chrono::system_clock::time_point fixed_now() {
  return std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
}

// One model trained on the small fixture (4 intents + __oos__, 10 rows each), once per build for
// every test process (support/shared_model.h).
class CalibrateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = new fs::path(fs::temp_directory_path() /
                         ("hengshi-calibrate-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::random_device{}())));
    fs::create_directories(*work_);
    const auto shared = testing::shared_small_intent_model();
    ASSERT_TRUE(shared.ok) << shared.output;
    auto engine = edge::IntentEngine::load(shared.dir);
    ASSERT_TRUE(engine) << engine.error().message;
    engine_ = engine->release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
    std::error_code ec;
    fs::remove_all(*work_, ec);
    delete work_;
    work_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(engine_, nullptr) << "the suite's model failed to train"; }

  static const edge::IntentEngine& engine() { return *engine_; }

  static std::vector<CalibrationRow> training_rows() {
    auto rows = read_calibration_rows(fixture("intent_small.jsonl").string());
    EXPECT_TRUE(rows) << rows.error().message;
    return rows ? *rows : std::vector<CalibrationRow>{};
  }

  // The training rows with the refund rows three times over, so one predicted intent has enough
  // support at min_support 20 and the others (about 10 rows each) do not; order_status rows are
  // task type "orders" (10 rows, too few), the rest take the default task type.
  static std::vector<CalibrationRow> mixed_support_rows() {
    std::vector<CalibrationRow> rows;
    for (const CalibrationRow& row : training_rows()) {
      CalibrationRow copy = row;
      if (copy.intent == "order_status") copy.task_type = "orders";
      const int copies = copy.intent == "refund" ? 3 : 1;
      for (int i = 0; i < copies; ++i) rows.push_back(copy);
    }
    return rows;
  }

  static CalibrateOptions options(double target_precision) {
    CalibrateOptions result;
    result.target_precision = target_precision;
    result.now = fixed_now();
    return result;
  }

  static CalibrateReport calibrate(const std::vector<CalibrationRow>& rows,
                                   const CalibrateOptions& calibrate_options) {
    auto report = calibrate_thresholds(engine(), rows, calibrate_options);
    EXPECT_TRUE(report) << report.error().message;
    return report ? *report : CalibrateReport{};
  }

  static fs::path write_file(const std::string& name, const std::string& text) {
    const fs::path path = *work_ / name;
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  }

  static void expect_read_error(const fs::path& path, const std::vector<std::string>& fragments) {
    auto rows = read_calibration_rows(path.string());
    ASSERT_FALSE(rows) << path << " unexpectedly read";
    EXPECT_EQ(rows.error().code, "data_invalid");
    for (const std::string& fragment : fragments) {
      EXPECT_TRUE(contains(rows.error().message, fragment))
          << "\"" << fragment << "\" not in: " << rows.error().message;
    }
  }

  static fs::path* work_;
  static edge::IntentEngine* engine_;
};

fs::path* CalibrateTest::work_ = nullptr;
edge::IntentEngine* CalibrateTest::engine_ = nullptr;

TEST_F(CalibrateTest, FileFromTrainingDataValidatesAndNamesTheModel) {
  const CalibrateReport report = calibrate(training_rows(), options(0.9));
  EXPECT_EQ(report.rows, 50u);
  EXPECT_EQ(report.skipped, 0u);
  const ThresholdsFile& file = report.file;
  EXPECT_EQ(file.model_version, engine().model_version());
  EXPECT_DOUBLE_EQ(file.target_precision, 0.9);
  EXPECT_EQ(file.version.rfind("thr-", 0), 0u) << file.version;
  EXPECT_EQ(file.version, make_thresholds_version(file, fixed_now()));

  auto thresholds = Thresholds::create(file);
  ASSERT_TRUE(thresholds) << thresholds.error().message;

  EXPECT_GE(file.default_band.high, 0.0);
  EXPECT_LE(file.default_band.high, kEdgeNever);
  EXPECT_GE(file.default_band.low, 0.0);
  EXPECT_LE(file.default_band.low, file.default_band.high);

  ASSERT_FALSE(report.groups.empty());
  EXPECT_EQ(report.groups.front().kind, "default");
  EXPECT_EQ(report.groups.front().fit.samples, 50u);
  // No row names a task type, so all 50 fall in the default one: the default's own rows, so it
  // keeps the default band and gets no entry.
  EXPECT_TRUE(file.task_types.empty());
  ASSERT_GE(report.groups.size(), 2u);
  EXPECT_EQ(report.groups[1].kind, "task_type");
  EXPECT_EQ(report.groups[1].key, "faq");
  EXPECT_EQ(report.groups[1].parent, "default");
  EXPECT_TRUE(is_inherited(report.groups[1].rule)) << report.groups[1].reason;
  EXPECT_TRUE(file.task_intents.empty());
  EXPECT_FALSE(file.intents.count(std::string(kOutOfScopeIntent)));
}

TEST_F(CalibrateTest, InScopeOnlyDataFitsAShareWithTheModelsStandIns) {
  std::vector<CalibrationRow> in_scope;
  for (const CalibrationRow& row : training_rows()) {
    if (row.intent != kOutOfScopeIntent) in_scope.push_back(row);
  }
  ASSERT_NE(engine().oos_scorer(), nullptr);
  const std::size_t stand_ins = engine().oos_scorer()->synthetic_out_of_scope().size();
  ASSERT_GT(stand_ins, 0u);

  CalibrateOptions shifted_options = options(0.9);
  shifted_options.oos_share = 0.3;
  const CalibrateReport shifted = calibrate(in_scope, shifted_options);
  EXPECT_EQ(shifted.synthetic_oos_rows, stand_ins);
  EXPECT_EQ(shifted.rows, in_scope.size() + stand_ins);
  EXPECT_DOUBLE_EQ(shifted.data_oos_share, 0.0);  // the data's own share, stand-ins apart
  EXPECT_DOUBLE_EQ(shifted.oos_share, 0.3);
  EXPECT_DOUBLE_EQ(shifted.final_policy.oos_share, 0.3);
  EXPECT_EQ(shifted.shift.size(), 4u);  // the leak is measurable now
  EXPECT_TRUE(shifted.file.notes.contains("synthetic_oos_rows"));
  EXPECT_TRUE(contains(format_calibrate_report(shifted), "stand-in rows"));

  // The same data fitted for no out-of-scope traffic never answers more strictly.
  const CalibrateReport own = calibrate(in_scope, options(0.9));
  EXPECT_EQ(own.synthetic_oos_rows, 0u);
  EXPECT_TRUE(own.shift.empty());
  EXPECT_GE(shifted.file.default_band.high, own.file.default_band.high);

  // Without stand-ins, a share the data cannot show is refused as before.
  shifted_options.synthetic_oos = false;
  auto refused = calibrate_thresholds(engine(), in_scope, shifted_options);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error().message, "has none")) << refused.error().message;

  // Data with its own __oos__ rows uses them, not the stand-ins.
  CalibrateOptions real_options = options(0.9);
  real_options.oos_share = 0.3;
  EXPECT_EQ(calibrate(training_rows(), real_options).synthetic_oos_rows, 0u);
}

// --cross-fit's rows (predicted out of fold) are fitted together with the held-out rows: more
// samples behind every band, and the report says how many were out of fold.
TEST_F(CalibrateTest, OutOfFoldRowsAreFittedWithTheHeldOutOnes) {
  const std::vector<CalibrationRow> rows = training_rows();
  std::vector<LabelledPrediction> out_of_fold;
  for (const CalibrationRow& row : rows) {
    out_of_fold.push_back(labelled_prediction(engine().predict(row.text), "faq", row.intent));
  }
  const CalibrateReport alone = calibrate(rows, options(0.9));
  auto both = calibrate_thresholds(engine(), rows, options(0.9), out_of_fold, 5);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->rows, alone.rows + rows.size());
  EXPECT_EQ(both->cross_fit_rows, rows.size());
  EXPECT_EQ(both->cross_fit_folds, 5);
  ASSERT_FALSE(alone.groups.empty());
  ASSERT_FALSE(both->groups.empty());
  EXPECT_EQ(both->groups.front().kind, "default");
  EXPECT_EQ(both->groups.front().fit.samples, 2 * alone.groups.front().fit.samples);
  const std::string text = format_calibrate_report(*both);
  EXPECT_TRUE(contains(text, std::to_string(rows.size()) + " out of fold")) << text;
  EXPECT_TRUE(contains(text, "5 fold models")) << text;
  EXPECT_FALSE(contains(format_calibrate_report(alone), "out of fold"));
  EXPECT_EQ(both->file.notes.at("cross_fit"),
            std::to_string(rows.size()) + " training rows out of fold (5 fold models), with " +
                std::to_string(alone.rows) + " held-out rows");
  EXPECT_EQ(alone.file.notes.count("cross_fit"), 0u);
  // The fixture has 10 __oos__ rows in 50; the out-of-fold copies would make that 20 in 100 too,
  // so add only in-scope ones: the share fitted for stays the held-out rows' own, not diluted.
  std::vector<LabelledPrediction> in_scope;
  for (const LabelledPrediction& row : out_of_fold) {
    if (row.intent_true != "__oos__") in_scope.push_back(row);
  }
  auto diluted = calibrate_thresholds(engine(), rows, options(0.9), in_scope, 5);
  ASSERT_TRUE(diluted) << diluted.error().message;
  EXPECT_DOUBLE_EQ(diluted->oos_share, alone.oos_share);
  EXPECT_GT(alone.oos_share, 0.0);
  EXPECT_LT(diluted->data_oos_share, alone.oos_share);
}

TEST_F(CalibrateTest, TrafficPriorCountsWhatTheModelPredictsPlusOne) {
  // Every refund question of the fixture twice, one other question, and blanks (not counted).
  std::vector<std::string> questions;
  std::size_t refund_rows = 0;
  for (const CalibrationRow& row : training_rows()) {
    if (row.intent != "refund") continue;
    ++refund_rows;
    questions.push_back(row.text);
    questions.push_back(row.text);
  }
  ASSERT_GT(refund_rows, 0u);
  questions.push_back("");
  questions.push_back("   ");
  std::map<std::string, std::size_t> predicted;
  std::size_t in_scope = 0;
  for (std::size_t i = 0; i < questions.size(); ++i) {
    if (questions[i].find_first_not_of(' ') == std::string::npos) continue;
    const edge::IntentPrediction prediction = engine().predict(questions[i]);
    if (prediction.intent == edge::kOutOfScopeIntent) continue;
    ++in_scope;
    ++predicted[prediction.intent];
  }
  const TrafficPrior traffic = traffic_intent_prior(engine(), questions);
  EXPECT_EQ(traffic.questions, 2 * refund_rows);
  EXPECT_EQ(traffic.in_scope, in_scope);
  EXPECT_EQ(traffic.intents_seen, predicted.size());
  EXPECT_GE(predicted["refund"], refund_rows);  // the model knows its own training rows
  std::size_t labels = 0;
  for (const std::string& label : engine().labels()) {
    if (label == edge::kOutOfScopeIntent) continue;
    ++labels;
    ASSERT_EQ(traffic.prior.count(label), 1u) << label;
    const auto it = predicted.find(label);
    EXPECT_DOUBLE_EQ(traffic.prior.at(label), 1.0 + (it == predicted.end() ? 0.0 : static_cast<double>(it->second)))
        << label;
  }
  EXPECT_EQ(traffic.prior.size(), labels);
  EXPECT_TRUE(traffic_intent_prior(engine(), {"", " "}).prior.empty());  // nothing asked: no mix
}

TEST_F(CalibrateTest, SameRowsGiveTheSameFile) {
  const CalibrateReport first = calibrate(mixed_support_rows(), options(0.9));
  const CalibrateReport second = calibrate(mixed_support_rows(), options(0.9));
  EXPECT_EQ(thresholds_to_json(first.file), thresholds_to_json(second.file));
}

TEST_F(CalibrateTest, LegacyRuleGivesBandsOnlyWhereSupportSuffices) {
  const std::vector<CalibrationRow> rows = mixed_support_rows();
  CalibrateOptions calibrate_options = options(0.9);
  calibrate_options.default_task_type = "general";
  calibrate_options.rule = ThresholdRule::per_group_legacy;
  const CalibrateReport report = calibrate(rows, calibrate_options);
  const ThresholdsFile& file = report.file;
  ASSERT_EQ(report.min_support, 20u);

  // What the groups must be, counted here from the engine's own predictions.
  std::map<std::string, std::size_t> predicted;
  for (const CalibrationRow& row : rows) {
    const edge::IntentPrediction prediction = engine().predict(row.text);
    if (!prediction.is_oos) ++predicted[prediction.intent];
  }
  std::size_t supported = 0;
  std::size_t unsupported = 0;
  for (const auto& [intent, count] : predicted) {
    SCOPED_TRACE(intent + ": " + std::to_string(count) + " predictions");
    const bool has_band = file.intents.count(intent) > 0;
    EXPECT_EQ(has_band, count >= 20);
    (count >= 20 ? supported : unsupported) += 1;
    if (!has_band) {
      EXPECT_TRUE(contains(file.notes.at("intent/" + intent), "inherited"));
    }
  }
  EXPECT_GE(supported, 1u) << "the tripled refund rows should make one intent fit";
  EXPECT_GE(unsupported, 1u);
  EXPECT_EQ(file.intents.size(), supported);

  // Task types: "general" (the default, 60 rows) gets a band; "orders" (10 rows) inherits.
  EXPECT_TRUE(file.task_types.count("general"));
  EXPECT_FALSE(file.task_types.count("orders"));
  EXPECT_FALSE(file.task_types.count("faq"));
  EXPECT_TRUE(contains(file.notes.at("task_type/orders"), "10 rows"));

  // Every fitted group saw at least min_support rows; every inherited one fewer.
  for (const GroupFit& group : report.groups) {
    EXPECT_GE(group.fit.samples, 20u) << group.kind << "/" << group.key;
  }
  for (const InheritedGroup& group : report.inherited) {
    EXPECT_LT(group.samples, 20u) << group.kind << "/" << group.key;
  }
  // A per-intent group is the rows PREDICTED as that intent, all of them answered.
  for (const GroupFit& group : report.groups) {
    if (group.kind != "intent") continue;
    EXPECT_EQ(group.fit.samples, predicted.at(group.key));
    std::size_t answered = 0;
    for (const BucketRow& bucket : group.fit.buckets) answered += bucket.answered;
    EXPECT_EQ(answered, group.fit.samples);
  }

  const std::string table = format_calibrate_report(report);
  EXPECT_TRUE(contains(table, "default: 70 samples")) << table;
  EXPECT_TRUE(contains(table, "task_type/general")) << table;
  EXPECT_TRUE(contains(table, "pass rate")) << table;
  EXPECT_TRUE(contains(table, "precision@high")) << table;
  EXPECT_TRUE(contains(table, "monotonic")) << table;
  EXPECT_TRUE(contains(table, "task_type/orders (10)")) << table;
}

TEST_F(CalibrateTest, HierarchicalRuleWritesOnlyGroupsWithEvidence) {
  const CalibrateReport report = calibrate(mixed_support_rows(), options(0.9));
  const ThresholdsFile& file = report.file;
  EXPECT_EQ(report.rule, ThresholdRule::hierarchical);
  std::size_t inherited = 0;
  for (const GroupFit& group : report.groups) {
    SCOPED_TRACE(group.kind + "/" + group.key + ": " + group.reason);
    if (group.kind == "default") continue;
    EXPECT_FALSE(group.reason.empty());
    EXPECT_EQ(file.notes.at(group.kind + "/" + group.key), group.reason);
    const std::string rule(to_string(group.rule));
    EXPECT_EQ(group.reason.rfind(rule + ":", 0), 0u);
    EXPECT_EQ(group.written, !is_inherited(group.rule));
    const auto& bands = group.kind == "task_type" ? file.task_types
                        : group.kind == "intent"  ? file.intents
                                                  : file.task_intents;
    EXPECT_EQ(bands.count(group.key) > 0, group.written);
    if (!group.written) ++inherited;
  }
  EXPECT_EQ(report.inherited.size(), inherited);
  for (const InheritedGroup& group : report.inherited) EXPECT_GT(group.samples, 0u);
  EXPECT_LE(report.final_policy.answered, report.rows);
  const std::string table = format_calibrate_report(report);
  EXPECT_TRUE(contains(table, "groups (")) << table;
  EXPECT_TRUE(contains(table, "task_type/orders")) << table;
  EXPECT_TRUE(contains(table, "final policy")) << table;
}

TEST_F(CalibrateTest, UnreachableTargetDisablesTheEdge) {
  // Noise that no threshold can avoid: the most confident answered row is labelled wrong, and
  // every threshold at or below its confidence includes it, so precision 1.0 is out of reach.
  std::vector<CalibrationRow> rows = mixed_support_rows();
  std::size_t most_confident = rows.size();
  double best = -1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const edge::IntentPrediction prediction = engine().predict(rows[i].text);
    if (!prediction.is_oos && prediction.confidence > best) {
      best = prediction.confidence;
      most_confident = i;
    }
  }
  ASSERT_LT(most_confident, rows.size()) << "the model answered nothing";
  rows[most_confident].intent = std::string(kOutOfScopeIntent);

  CalibrateOptions legacy = options(1.0);
  legacy.rule = ThresholdRule::per_group_legacy;
  const CalibrateReport report = calibrate(rows, legacy);
  const ThresholdsFile& file = report.file;
  ASSERT_FALSE(report.groups.empty());
  const GroupFit& default_group = report.groups.front();
  EXPECT_FALSE(default_group.fit.reachable);
  EXPECT_DOUBLE_EQ(file.default_band.high, kEdgeNever);
  EXPECT_LE(file.default_band.low, kEdgeNever);
  EXPECT_TRUE(contains(file.notes.at("default"), "unreachable")) << file.notes.at("default");

  for (const GroupFit& group : report.groups) {
    if (group.fit.reachable) continue;
    SCOPED_TRACE(group.kind + "/" + group.key);
    if (group.kind == "task_type") {
      EXPECT_DOUBLE_EQ(file.task_types.at(group.key).high, kEdgeNever);
    }
    if (group.kind == "intent") {
      EXPECT_DOUBLE_EQ(file.intents.at(group.key).high, kEdgeNever);
      EXPECT_TRUE(contains(file.notes.at("intent/" + group.key), "unreachable"));
    }
  }
  EXPECT_TRUE(Thresholds::create(file));
  EXPECT_TRUE(contains(format_calibrate_report(report), "edge never"));
}

TEST_F(CalibrateTest, WrittenFileRoundTrips) {
  const CalibrateReport report = calibrate(mixed_support_rows(), options(0.9));
  const fs::path path = *work_ / "thresholds.json";
  ASSERT_TRUE(write_thresholds_file(report.file, path.string()));
  auto loaded = load_thresholds_file(path.string());
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(thresholds_to_json(*loaded), thresholds_to_json(report.file));
  EXPECT_EQ(loaded->version, report.file.version);
  EXPECT_EQ(loaded->model_version, engine().model_version());
  EXPECT_EQ(loaded->intents.size(), report.file.intents.size());
  EXPECT_EQ(loaded->notes, report.file.notes);
}

TEST_F(CalibrateTest, RefusesBadOptionsAndUnusableRows) {
  const std::vector<CalibrationRow> rows = training_rows();
  for (double target : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    auto report = calibrate_thresholds(engine(), rows, options(target));
    ASSERT_FALSE(report) << target;
    EXPECT_EQ(report.error().code, "invalid_argument");
    EXPECT_TRUE(contains(report.error().message, "target precision")) << report.error().message;
  }
  CalibrateOptions no_support = options(0.9);
  no_support.min_support = 0;
  EXPECT_FALSE(calibrate_thresholds(engine(), rows, no_support));
  CalibrateOptions no_task_type = options(0.9);
  no_task_type.default_task_type = "";
  EXPECT_FALSE(calibrate_thresholds(engine(), rows, no_task_type));

  const std::vector<CalibrationRow> blank = {{"", "refund", ""}, {"hello", " ", ""}};
  auto report = calibrate_thresholds(engine(), blank, options(0.9));
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, "data_invalid");
  EXPECT_TRUE(contains(report.error().message, "2 skipped")) << report.error().message;

  std::vector<CalibrationRow> some_blank = rows;
  some_blank.push_back({" ", "refund", ""});
  EXPECT_EQ(calibrate(some_blank, options(0.9)).skipped, 1u);
}

TEST_F(CalibrateTest, ReadsTaskTypesAndIgnoresOtherFields) {
  const fs::path path = write_file(
      "rows.jsonl",
      "{\"text\": \"where is my order\", \"intent\": \"order_status\", \"task_type\": \"orders\", "
      "\"answer\": \"see My Orders\"}\n"
      "\n"
      "{\"text\": \"tell me a joke\", \"intent\": \"__oos__\", \"task_type\": null}\n");
  auto rows = read_calibration_rows(path.string());
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].text, "where is my order");
  EXPECT_EQ((*rows)[0].intent, "order_status");
  EXPECT_EQ((*rows)[0].task_type, "orders");
  EXPECT_EQ((*rows)[1].intent, "__oos__");
  EXPECT_EQ((*rows)[1].task_type, "");
}

TEST_F(CalibrateTest, ReadErrorsNameFileAndLine) {
  const std::string bad_json = fixture("intent_bad_json.jsonl").string();
  expect_read_error(bad_json, {bad_json + ":3:", "invalid JSON"});
  const std::string missing_text = fixture("intent_missing_text.jsonl").string();
  expect_read_error(missing_text, {missing_text + ":3:", "missing field \"text\""});
  const std::string empty_intent = fixture("intent_empty_intent.jsonl").string();
  expect_read_error(empty_intent, {empty_intent + ":2:", "\"intent\" is empty"});
  const std::string empty = fixture("intent_empty.jsonl").string();
  expect_read_error(empty, {empty + ":", "empty"});

  const fs::path missing_intent = write_file("missing_intent.jsonl", "{\"text\": \"hi\"}\n");
  expect_read_error(missing_intent, {missing_intent.string() + ":1:", "\"intent\""});
  const fs::path bad_task_type =
      write_file("bad_task_type.jsonl",
                 "{\"text\": \"hi\", \"intent\": \"a\"}\n"
                 "{\"text\": \"yo\", \"intent\": \"b\", \"task_type\": 7}\n");
  expect_read_error(bad_task_type, {bad_task_type.string() + ":2:", "\"task_type\""});
  const fs::path not_object = write_file("not_object.jsonl", "[1, 2]\n");
  expect_read_error(not_object, {not_object.string() + ":1:", "not a JSON object"});
  expect_read_error(*work_ / "no-such-file.jsonl", {"no-such-file.jsonl", "cannot open"});
}

// --- calibrate_predictions: the rules over hand-made predictions (no model) ---

// `count` predictions of `intent` under `task` at `confidence`, the first `passes` right (the
// rest truly "other").
void add_rows(std::vector<LabelledPrediction>& rows, const std::string& task,
              const std::string& intent, double confidence, int count, int passes) {
  for (int i = 0; i < count; ++i) {
    rows.push_back(
        LabelledPrediction{task, i < passes ? intent : "other", intent, confidence, false});
  }
}

// `count` out-of-scope rows answered as `intent` at `confidence`; an empty intent = the model
// calls them out of scope itself (never answered).
void add_oos(std::vector<LabelledPrediction>& rows, const std::string& intent, double confidence,
             int count) {
  const std::string oos(kOutOfScopeIntent);
  for (int i = 0; i < count; ++i) {
    rows.push_back(
        LabelledPrediction{"faq", oos, intent.empty() ? oos : intent, confidence, intent.empty()});
  }
}

CalibrateOptions fixed_options(ThresholdRule rule = ThresholdRule::hierarchical) {
  CalibrateOptions options;
  options.target_precision = 0.97;
  options.min_support = 20;
  options.rule = rule;
  options.now = fixed_now();
  options.confidence = 0;  // the point-estimate rules these tests pin; the bound has its own tests
  return options;
}

CalibrateReport calibrate_rows(const std::vector<LabelledPrediction>& rows,
                               const CalibrateOptions& options) {
  auto report = calibrate_predictions(rows, options);
  EXPECT_TRUE(report) << report.error().message;
  return report ? *report : CalibrateReport{};
}

const GroupFit* find_group(const CalibrateReport& report, const std::string& kind,
                           const std::string& key) {
  for (const GroupFit& group : report.groups) {
    if (group.kind == kind && group.key == key) return &group;
  }
  return nullptr;
}

// Default: 300/304 right at 0.9 (4 out-of-scope rows answered there), 370/404 at 0.8 → 0.9.
std::vector<LabelledPrediction> leaky_rows() {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "refund", 0.9, 200, 200);
  add_rows(rows, "faq", "hours", 0.95, 100, 100);
  add_rows(rows, "faq", "hours", 0.8, 100, 70);
  add_oos(rows, "refund", 0.9, 4);
  add_oos(rows, "", 0.2, 46);
  return rows;
}

TEST(CalibratePredictionsTest, FinalPolicyCountsNoAnswerWithoutACannedOne) {
  // The same rows, but "hours" has no canned answer: decide() never answers it from the edge,
  // so the final policy loses its 100 right answers while the bands stay as they were.
  std::vector<LabelledPrediction> rows = leaky_rows();
  for (LabelledPrediction& row : rows) row.has_answer = row.intent_predicted != "hours";
  const CalibrateReport with = calibrate_rows(leaky_rows(), fixed_options());
  const CalibrateReport without = calibrate_rows(rows, fixed_options());
  EXPECT_DOUBLE_EQ(without.file.default_band.high, with.file.default_band.high);
  EXPECT_EQ(without.final_policy.answered, with.final_policy.answered - 100);
  EXPECT_NEAR(without.final_policy.precision, 200.0 / 204, 1e-12);
  EXPECT_NEAR(without.final_policy.in_scope_coverage, 200.0 / 400, 1e-12);
}

TEST(CalibratePredictionsTest, FinalPolicyMatchesAHandCount) {
  const CalibrateReport report = calibrate_rows(leaky_rows(), fixed_options());
  EXPECT_EQ(report.rows, 450u);
  EXPECT_DOUBLE_EQ(report.file.default_band.high, 0.9);
  // Every group's rows agree with the default band: nothing written but the default.
  EXPECT_TRUE(report.file.task_types.empty());
  EXPECT_TRUE(report.file.intents.empty());
  EXPECT_EQ(report.inherited.size(), 3u);  // task_type/faq, intent/hours, intent/refund
  ASSERT_EQ(report.groups.size(), 4u);
  for (const GroupFit& group : report.groups) {
    if (group.kind == "default") continue;
    EXPECT_FALSE(group.written) << group.key;
    EXPECT_EQ(group.rule, BandRule::inherited_consistent) << group.key << ": " << group.reason;
    EXPECT_EQ(group.parent, "default");
    EXPECT_TRUE(contains(report.file.notes.at(group.kind + "/" + group.key), "inherited"));
  }

  // By hand: the edge answers refund (200 right + 4 out of scope) and hours at 0.95 (100 right).
  const PolicyFigures& policy = report.final_policy;
  EXPECT_EQ(policy.answered, 304u);
  EXPECT_NEAR(policy.oos_share, 50.0 / 450, 1e-12);
  EXPECT_NEAR(policy.coverage, 304.0 / 450, 1e-12);
  EXPECT_NEAR(policy.precision, 300.0 / 304, 1e-12);
  EXPECT_NEAR(policy.oos_leak, 4.0 / 50, 1e-12);
  EXPECT_NEAR(policy.in_scope_coverage, 300.0 / 400, 1e-12);

  // At 30% out of scope: coverage 0.7 * 0.75 + 0.3 * 0.08, precision 0.7 * 0.75 / coverage.
  ASSERT_EQ(report.shift.size(), 4u);
  const PolicyFigures& at_30 = report.shift[3];
  EXPECT_DOUBLE_EQ(at_30.oos_share, 0.3);
  EXPECT_NEAR(at_30.coverage, 0.7 * 0.75 + 0.3 * 0.08, 1e-12);
  EXPECT_NEAR(at_30.precision, 0.7 * 0.75 / (0.7 * 0.75 + 0.3 * 0.08), 1e-12);
  EXPECT_NEAR(at_30.oos_leak, 0.08, 1e-12);
  for (std::size_t i = 0; i + 1 < report.shift.size(); ++i) {
    EXPECT_GT(report.shift[i].precision, report.shift[i + 1].precision);  // leak weighs more
    EXPECT_DOUBLE_EQ(report.shift[i].oos_leak, report.shift[i + 1].oos_leak);
  }

  const std::string table = format_calibrate_report(report);
  EXPECT_TRUE(contains(table, "rule hierarchical")) << table;
  EXPECT_TRUE(contains(table, "inherited: evidence consistent with parent")) << table;
  EXPECT_TRUE(contains(table, "final policy on the calibration rows")) << table;
  EXPECT_TRUE(contains(table, "(304 of 450 rows answered)")) << table;
  EXPECT_TRUE(contains(table, "prior shift")) << table;
  EXPECT_TRUE(contains(table, "0.30")) << table;
}

TEST(CalibratePredictionsTest, StricterLooserAndTaskIntentParents) {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "hours", 0.8, 400, 400);
  add_rows(rows, "faq", "refund", 0.8, 200, 200);
  add_rows(rows, "orders", "refund", 0.95, 100, 100);
  add_rows(rows, "orders", "refund", 0.8, 100, 80);
  const CalibrateReport report = calibrate_rows(rows, fixed_options());
  const ThresholdsFile& file = report.file;
  // Default: 780/800 at 0.8.
  EXPECT_DOUBLE_EQ(file.default_band.high, 0.8);

  // orders: 180/200 at the default's high is shown below 0.97 → only 0.95 and up.
  const GroupFit* orders = find_group(report, "task_type", "orders");
  ASSERT_NE(orders, nullptr);
  EXPECT_EQ(orders->rule, BandRule::stricter) << orders->reason;
  ASSERT_TRUE(file.task_types.count("orders"));
  EXPECT_DOUBLE_EQ(file.task_types.at("orders").high, 0.95);
  EXPECT_FALSE(file.task_types.count("faq"));
  // refund: 380/400 (Wilson upper 0.965) → stricter too.
  const GroupFit* refund = find_group(report, "intent", "refund");
  ASSERT_NE(refund, nullptr);
  EXPECT_EQ(refund->rule, BandRule::stricter) << refund->reason;
  EXPECT_DOUBLE_EQ(file.intents.at("refund").high, 0.95);
  EXPECT_FALSE(file.intents.count("hours"));

  // refund spans two task types, so each gets a group whose parent is the refund band the
  // lookup would otherwise use; hours (one task type) gets none.
  const GroupFit* faq_refund = find_group(report, "task_intent", "faq/refund");
  const GroupFit* orders_refund = find_group(report, "task_intent", "orders/refund");
  ASSERT_NE(faq_refund, nullptr);
  ASSERT_NE(orders_refund, nullptr);
  EXPECT_EQ(find_group(report, "task_intent", "faq/hours"), nullptr);
  EXPECT_EQ(faq_refund->parent, "intent/refund");
  // faq/refund: 200/200 at 0.8, Wilson lower 0.987 >= 0.97 → looser than its parent.
  EXPECT_EQ(faq_refund->rule, BandRule::looser) << faq_refund->reason;
  EXPECT_DOUBLE_EQ(file.task_intents.at("faq/refund").high, 0.8);
  EXPECT_TRUE(contains(faq_refund->reason, "looser: Wilson lower")) << faq_refund->reason;
  EXPECT_TRUE(is_inherited(orders_refund->rule)) << orders_refund->reason;
  EXPECT_FALSE(file.task_intents.count("orders/refund"));

  // The lookup: hours and faq/refund at 0.8 (600), orders/refund at refund's 0.95 (100).
  EXPECT_EQ(report.final_policy.answered, 700u);
  EXPECT_NEAR(report.final_policy.coverage, 700.0 / 800, 1e-12);
  EXPECT_DOUBLE_EQ(report.final_policy.precision, 1.0);
  EXPECT_DOUBLE_EQ(report.final_policy.oos_leak, 0.0);
  EXPECT_TRUE(report.shift.empty());  // no out-of-scope rows: no shift to show
  EXPECT_TRUE(contains(format_calibrate_report(report), "no out-of-scope rows"));
  EXPECT_TRUE(Thresholds::create(file));
}

TEST(CalibratePredictionsTest, ThinGroupKeepsTheEdgeWhereTheLegacyRuleSwitchedItOff) {
  // The failure: 20 rows, one wrong, is no evidence against the default band.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "hours", 0.9, 400, 400);
  add_rows(rows, "faq", "refund", 0.95, 15, 14);
  add_rows(rows, "faq", "refund", 0.92, 5, 5);

  const CalibrateReport legacy =
      calibrate_rows(rows, fixed_options(ThresholdRule::per_group_legacy));
  EXPECT_EQ(legacy.rule, ThresholdRule::per_group_legacy);
  EXPECT_DOUBLE_EQ(legacy.file.default_band.high, 0.9);
  EXPECT_DOUBLE_EQ(legacy.file.intents.at("refund").high, kEdgeNever);
  EXPECT_TRUE(contains(legacy.file.notes.at("intent/refund"), "unreachable"));
  EXPECT_EQ(legacy.final_policy.answered, 400u);

  const CalibrateReport shrunk = calibrate_rows(rows, fixed_options());
  EXPECT_DOUBLE_EQ(shrunk.file.default_band.high, 0.9);
  EXPECT_FALSE(shrunk.file.intents.count("refund"));
  EXPECT_TRUE(contains(shrunk.file.notes.at("intent/refund"), "inherited"))
      << shrunk.file.notes.at("intent/refund");
  EXPECT_EQ(shrunk.final_policy.answered, 420u);
  EXPECT_NEAR(shrunk.final_policy.precision, 419.0 / 420, 1e-12);
  EXPECT_GT(shrunk.final_policy.coverage, legacy.final_policy.coverage);
  EXPECT_TRUE(contains(shrunk.file.notes.at("calibration"), "rule hierarchical"));
  EXPECT_TRUE(contains(legacy.file.notes.at("calibration"), "rule per_group_legacy"));
}

// Out-of-scope rows sit at 0.7 with the weaker in-scope answers.
std::vector<LabelledPrediction> shifted_rows() {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "refund", 0.95, 200, 200);
  add_rows(rows, "faq", "refund", 0.7, 200, 200);
  add_oos(rows, "refund", 0.7, 6);
  add_oos(rows, "", 0.3, 20);
  return rows;
}

TEST(CalibratePredictionsTest, MoreOutOfScopeTrafficRaisesTheThreshold) {
  const CalibrateReport own = calibrate_rows(shifted_rows(), fixed_options());
  EXPECT_NEAR(own.data_oos_share, 26.0 / 426, 1e-12);
  EXPECT_DOUBLE_EQ(own.oos_share, own.data_oos_share);
  // 400/406 = 0.985 at 0.7 where 6% of traffic is out of scope.
  EXPECT_DOUBLE_EQ(own.file.default_band.high, 0.7);
  EXPECT_NEAR(own.final_policy.oos_leak, 6.0 / 26, 1e-12);
  EXPECT_EQ(own.file.notes.at("oos_share"), "0.061");

  CalibrateOptions options = fixed_options();
  options.oos_share = 0.3;
  const CalibrateReport shifted = calibrate_rows(shifted_rows(), options);
  // At 30%: out-of-scope rows weigh 0.3/s0, in-scope 0.7/(1-s0), so at 0.7 the precision is
  // 400 w_in / (400 w_in + 6 w_oos) = 0.91 < 0.97 → only 0.95 and up.
  const double w_in = 0.7 / (400.0 / 426);
  const double w_oos = 0.3 / (26.0 / 426);
  EXPECT_LT(400 * w_in / (400 * w_in + 6 * w_oos), 0.97);
  EXPECT_DOUBLE_EQ(shifted.file.default_band.high, 0.95);
  EXPECT_DOUBLE_EQ(shifted.oos_share, 0.3);
  EXPECT_EQ(shifted.file.notes.at("oos_share"), "0.300");
  EXPECT_TRUE(contains(shifted.file.notes.at("calibration"), "out-of-scope share 0.300"));
  EXPECT_DOUBLE_EQ(shifted.final_policy.oos_share, 0.3);
  EXPECT_DOUBLE_EQ(shifted.final_policy.oos_leak, 0.0);
  EXPECT_DOUBLE_EQ(shifted.final_policy.precision, 1.0);
  EXPECT_NEAR(shifted.final_policy.coverage, 0.7 * 0.5, 1e-12);
  // The own-share policy, seen at 30% out of scope, misses the target.
  EXPECT_LT(own.shift[3].precision, 0.97);
  EXPECT_NE(own.file.version.substr(21), shifted.file.version.substr(21));
}

TEST(CalibratePredictionsTest, MaxLeakRaisesEveryBandToTheLeastFloorThatKeepsIt) {
  // 300 right answers (refund at 0.9, hours at 0.95) and 4 out-of-scope rows answered as refund
  // at 0.91..0.94, out of 50: a leak of 0.08 under the fitted bands.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "refund", 0.9, 200, 200);
  add_rows(rows, "faq", "hours", 0.95, 100, 100);
  for (double confidence : {0.91, 0.92, 0.93, 0.94}) add_oos(rows, "refund", confidence, 1);
  add_oos(rows, "", 0.2, 46);
  CalibrateOptions options = fixed_options();
  options.target_precision = 0.95;
  const CalibrateReport free = calibrate_rows(rows, options);
  EXPECT_NEAR(free.final_policy.oos_leak, 4.0 / 50, 1e-12);

  // At most 4% = 2 rows: the floor sits just above the third most confident (0.92), so 0.93 and
  // 0.94 still pass, and so do the hours answers; refund's 0.9 answers are the price.
  options.max_oos_leak = 0.04;
  const CalibrateReport capped = calibrate_rows(rows, options);
  ASSERT_TRUE(capped.leak_floor);
  EXPECT_GT(*capped.leak_floor, 0.92);
  EXPECT_LT(*capped.leak_floor, 0.9201);
  EXPECT_NEAR(capped.leak_before_cap, 4.0 / 50, 1e-12);
  EXPECT_NEAR(capped.final_policy.oos_leak, 2.0 / 50, 1e-12);
  EXPECT_EQ(capped.final_policy.answered, 102u);
  EXPECT_GE(capped.file.default_band.high, *capped.leak_floor);
  for (const auto& [intent, band] : capped.file.intents) EXPECT_GE(band.high, *capped.leak_floor);
  EXPECT_TRUE(contains(capped.file.notes.at("max_oos_leak"), "raised"));
  EXPECT_TRUE(contains(format_calibrate_report(capped), "leak capped"));

  // A maximum the fitted bands already keep changes nothing.
  options.max_oos_leak = 0.1;
  const CalibrateReport kept = calibrate_rows(rows, options);
  EXPECT_FALSE(kept.leak_floor);
  EXPECT_DOUBLE_EQ(kept.file.default_band.high, free.file.default_band.high);

  // Nothing to measure a leak on, or a maximum out of range: refused.
  std::vector<LabelledPrediction> in_scope_only;
  add_rows(in_scope_only, "faq", "hours", 0.9, 100, 100);
  options.max_oos_leak = 0.03;
  auto refused = calibrate_predictions(in_scope_only, options);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error().message, "needs out-of-scope rows")) << refused.error().message;
  options.max_oos_leak = 1.5;
  EXPECT_FALSE(calibrate_predictions(rows, options));
}

TEST(CalibratePredictionsTest, TheTrafficsIntentMixDecidesWhoseErrorsCount) {
  // "rare" is right on its own 200 rows, but 4 "popular" questions are mistaken for it. With
  // every intent asked alike that is 200/204, above target; when traffic asks popular 9 times as
  // often, those 4 weigh 9 times more and rare's band must close.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "popular", 0.9, 200, 200);
  add_rows(rows, "faq", "rare", 0.9, 200, 200);
  for (int i = 0; i < 4; ++i) rows.push_back(LabelledPrediction{"faq", "popular", "rare", 0.9, false});
  add_oos(rows, "", 0.2, 40);

  const CalibrateReport alike = calibrate_rows(rows, fixed_options());
  EXPECT_EQ(alike.file.intents.count("rare"), 0u);  // consistent with the default band
  EXPECT_DOUBLE_EQ(alike.file.default_band.high, 0.9);
  EXPECT_NEAR(alike.final_policy.precision, 400.0 / 404, 1e-12);
  EXPECT_EQ(alike.intent_prior_intents, 0u);

  CalibrateOptions options = fixed_options();
  options.intent_prior = {{"popular", 9}, {"rare", 1}};
  const CalibrateReport mixed = calibrate_rows(rows, options);
  EXPECT_EQ(mixed.intent_prior_intents, 2u);
  ASSERT_EQ(mixed.file.intents.count("rare"), 1u);
  EXPECT_DOUBLE_EQ(mixed.file.intents.at("rare").high, kEdgeNever);  // nothing above 0.9 to keep
  const GroupFit* rare = find_group(mixed, "intent", "rare");
  ASSERT_NE(rare, nullptr);
  EXPECT_EQ(rare->rule, BandRule::stricter) << rare->reason;
  EXPECT_DOUBLE_EQ(mixed.file.default_band.high, 0.9);  // popular still answers
  // The default band rests on the rows' own mix: weighted, it would read 0.982, not 400/404.
  ASSERT_NE(find_group(mixed, "default", ""), nullptr);
  EXPECT_NEAR(find_group(mixed, "default", "")->precision_at_high, 400.0 / 404, 1e-12);
  // By hand, on the traffic's mix: popular's 204 rows carry 0.9 of the in-scope weight, rare's
  // 200 rows 0.1; the edge answers popular's 200 (all right) and nothing of rare.
  EXPECT_NEAR(mixed.final_policy.precision, 1.0, 1e-12);
  EXPECT_NEAR(mixed.final_policy.in_scope_coverage, 0.9 * 200.0 / 204, 1e-12);
  EXPECT_TRUE(contains(mixed.file.notes.at("intent_prior"), "2 intents")) << mixed.file.notes.at("intent_prior");
  const std::string table = format_calibrate_report(mixed);
  EXPECT_TRUE(contains(table, "weighted to the traffic's mix over 2 intents")) << table;

  options.intent_prior = {{"neither", 1}};
  auto refused = calibrate_predictions(rows, options);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "invalid_argument");
}

TEST(CalibratePredictionsTest, OosShareWithoutOutOfScopeRowsIsRefused) {
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "hours", 0.9, 100, 100);
  CalibrateOptions options = fixed_options();
  options.oos_share = 0.2;
  auto report = calibrate_predictions(rows, options);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code, "invalid_argument");
  EXPECT_TRUE(contains(report.error().message, "has none")) << report.error().message;
  options.oos_share = 0.0;  // nothing to reweight, nothing refused
  EXPECT_TRUE(calibrate_predictions(rows, options));
  options.oos_share = 1.0;
  EXPECT_FALSE(calibrate_predictions(rows, options));
  EXPECT_FALSE(calibrate_predictions({}, fixed_options()));
}

}  // namespace
}  // namespace hengshi::router

namespace hengshi::router {
namespace {

TEST(CalibrateBoundTest, ABandFitsTheLowerBoundNotThePointEstimate) {
  // 60 of 60 right at 0.95, 38 of 40 at 0.8: from 0.8 up 98 of 100 — the point estimate takes
  // 0.8, but 98 of 100 has a 90% lower bound of 0.953, not shown to reach 0.97 on new traffic;
  // 60 of 60 has 0.973. The bound keeps 0.95 and up, and the report says it made it stricter.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "refund", 0.95, 60, 60);
  add_rows(rows, "faq", "refund", 0.8, 40, 38);
  CalibrateOptions options = fixed_options();
  const CalibrateReport point = calibrate_rows(rows, options);
  EXPECT_DOUBLE_EQ(point.file.default_band.high, 0.8);
  EXPECT_TRUE(contains(format_calibrate_report(point), "point estimates")) << format_calibrate_report(point);

  options.confidence = 0.9;
  const CalibrateReport bounded = calibrate_rows(rows, options);
  EXPECT_DOUBLE_EQ(bounded.file.default_band.high, 0.95);
  EXPECT_GE(wilson_lower_bound(1.0, 60, 0.9), 0.97);
  EXPECT_LT(wilson_lower_bound(0.98, 100, 0.9), 0.97);
  const std::string report = format_calibrate_report(bounded);
  EXPECT_TRUE(contains(report, "on new traffic, at 90% confidence: precision >=")) << report;
  EXPECT_TRUE(contains(report, "made stricter by the bound (against the point estimate): default")) << report;
  // A higher confidence never loosens a band.
  options.confidence = 0.99;
  EXPECT_GE(calibrate_rows(rows, options).file.default_band.high, bounded.file.default_band.high);
}

TEST(CalibrateBoundTest, TheLeakCapHoldsOnItsUpperBound) {
  // 200 out-of-scope rows, 6 of them answered (3%) at 0.91..0.96. A cap of 3% is met by the
  // point estimate, but the upper bound of 6/200 is over 4%: the floor rises until it is not.
  std::vector<LabelledPrediction> rows;
  add_rows(rows, "faq", "refund", 0.9, 300, 300);
  for (double confidence : {0.91, 0.92, 0.93, 0.94, 0.95, 0.96}) add_oos(rows, "refund", confidence, 1);
  add_oos(rows, "", 0.2, 194);
  CalibrateOptions options = fixed_options();
  options.target_precision = 0.95;
  options.max_oos_leak = 0.03;
  EXPECT_FALSE(calibrate_rows(rows, options).leak_floor) << "6 of 200 is 3%: the point estimate keeps it";
  options.confidence = 0.9;
  const CalibrateReport bounded = calibrate_rows(rows, options);
  ASSERT_TRUE(bounded.leak_floor);
  const double leak = bounded.final_policy.oos_leak;
  EXPECT_LT(leak, 0.03);
  EXPECT_LE(wilson_upper_bound(leak, 200, 0.9), 0.03 + 1e-9);
  options.confidence = 1.0;
  auto refused = calibrate_predictions(rows, options);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error().message, "confidence must be in [0, 1)"));
}

}  // namespace
}  // namespace hengshi::router
