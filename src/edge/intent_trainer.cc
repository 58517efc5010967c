#include "edge/intent_trainer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "core/progress.h"
#include "edge/model_manifest.h"
#include "edge/oos_score.h"

namespace hengshi::edge {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kValidationFraction = 0.15;
// The search trains on at most this many rows; the final model uses all of them.
constexpr std::size_t kMaxSearchRows = 4000;
// Training parts up to this size calibrate on k-fold out-of-fold predictions (see below).
constexpr std::size_t kCrossFitMaxRows = 3000;
constexpr int kCalibrationFolds = 5;

struct PreparedRow {
  std::string model_input;  // normalised, segmented tokens
  std::string intent;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Training length scales with the data so that every grid point sees about the same number of
// updates: ~100 epochs for a small FAQ, ~25 for ten thousand rows.
int epochs_for(std::size_t train_rows) {
  const double epochs = 250000.0 / static_cast<double>(std::max<std::size_t>(train_rows, 1));
  return static_cast<int>(std::clamp(epochs, 20.0, 100.0));
}

// Hash buckets for word and character n-grams: enough to keep collisions rare for the data at
// hand, without a 25 MB model for a 50-row FAQ (the input matrix is buckets × dim floats).
int buckets_for(std::size_t training_tokens) {
  return static_cast<int>(std::clamp<std::size_t>(8 * training_tokens, 20000, 100000));
}

// The search grid, most often best first, so a short budget still gets a good model. Word
// bigrams (character bigrams under han_chars) are on everywhere; the axes are sub-word character
// n-grams (typos, inflections), learning rate, training length and trigram context.
std::vector<FastTextParams> search_grid(std::size_t train_rows, std::size_t training_tokens,
                                        int seed) {
  const int epochs = epochs_for(train_rows);
  std::vector<FastTextParams> grid;
  for (const auto& [epoch, lr, word_ngrams, minn, maxn] :
       std::vector<std::tuple<int, double, int, int, int>>{
           {epochs, 0.5, 2, 3, 6},
           {epochs, 0.5, 2, 0, 0},
           {epochs, 1.0, 2, 3, 6},
           {epochs * 2, 0.25, 2, 3, 6},
           {epochs, 0.5, 3, 0, 0},
       }) {
    FastTextParams params;
    params.epoch = epoch;
    params.lr = lr;
    params.word_ngrams = word_ngrams;
    params.minn = minn;
    params.maxn = maxn;
    params.bucket = buckets_for(training_tokens);
    params.seed = seed;
    grid.push_back(params);
  }
  return grid;
}

// Predicted CPU seconds for fastText to train `params` on rows[indices]. Its work per example and
// epoch is proportional to the input rows it averages (tokens, word n-grams, sub-word n-grams)
// plus the labels of the softmax. Predicted, not measured, so which grid points run — and so the
// model — depends only on the data and the options, never on how busy the machine is.
constexpr double kCpuSecondsPerRowUpdate = 0.4e-6;  // fitted on the 2-core development box

double predicted_cpu_seconds(const FastTextParams& params, const std::vector<PreparedRow>& rows,
                             const std::vector<std::size_t>& indices, std::size_t labels) {
  double units = 0.0;
  for (std::size_t i : indices) {
    const std::string& line = rows[i].model_input;
    std::size_t tokens = 1;  // the end-of-line token
    std::size_t token_chars = 0;
    double subwords = 0.0;
    const auto close_token = [&] {
      const auto length = static_cast<double>(token_chars + 2);  // with '<' and '>'
      for (int n = params.minn; params.maxn > 0 && n <= params.maxn; ++n) {
        subwords += std::max(0.0, length - n + 1);
      }
      token_chars = 0;
    };
    for (std::size_t k = 0; k < line.size(); ++k) {
      const auto byte = static_cast<unsigned char>(line[k]);
      if (byte == ' ') {
        close_token();
        ++tokens;
      } else if ((byte & 0xC0) != 0x80) {  // count UTF-8 characters, as fastText's n-grams do
        ++token_chars;
      }
    }
    close_token();
    units += static_cast<double>(tokens * static_cast<std::size_t>(params.word_ngrams)) + subwords +
             static_cast<double>(labels);
  }
  return kCpuSecondsPerRowUpdate * units * params.epoch;
}

double process_cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Stratified split of `indices`: from each intent, round(n · fraction) rows go to `held`, but
// every intent keeps at least one row on the training side.
void stratified_split(const std::vector<PreparedRow>& rows, const std::vector<std::size_t>& indices,
                      double fraction, std::mt19937_64& rng, std::vector<std::size_t>& kept,
                      std::vector<std::size_t>& held) {
  std::map<std::string, std::vector<std::size_t>> by_intent;
  for (std::size_t i : indices) by_intent[rows[i].intent].push_back(i);
  for (auto& [intent, members] : by_intent) {
    std::shuffle(members.begin(), members.end(), rng);
    const auto n = members.size();
    auto take = static_cast<std::size_t>(static_cast<double>(n) * fraction + 0.5);
    take = std::min(take, n - 1);
    held.insert(held.end(), members.begin(), members.begin() + static_cast<std::ptrdiff_t>(take));
    kept.insert(kept.end(), members.begin() + static_cast<std::ptrdiff_t>(take), members.end());
  }
  std::shuffle(kept.begin(), kept.end(), rng);
  std::shuffle(held.begin(), held.end(), rng);
}

Status write_fasttext_file(const std::filesystem::path& path, const std::vector<PreparedRow>& rows,
                           const std::vector<std::size_t>& indices) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (std::size_t i : indices) {
    out << "__label__" << rows[i].intent << ' ' << rows[i].model_input << '\n';
  }
  out.close();
  if (!out) return Error{"io_error", path.string() + ": cannot write training file"};
  return Ok{};
}

// Logits of `model` for rows[indices], re-ordered into `label_order` (the served model's label
// order: a cross-validation fold model may order, or lack, labels differently). A label the model
// lacks gets a logit far below the others.
std::vector<LabeledLogits> scored_logits(const IntentModel& model,
                                         const std::vector<std::string>& label_order,
                                         const std::vector<PreparedRow>& rows,
                                         const std::vector<std::size_t>& indices) {
  std::map<std::string, int> model_index;
  for (std::size_t i = 0; i < model.labels().size(); ++i) {
    model_index[model.labels()[i]] = static_cast<int>(i);
  }
  std::map<std::string, int> target_index;
  for (std::size_t i = 0; i < label_order.size(); ++i) {
    target_index[label_order[i]] = static_cast<int>(i);
  }
  std::vector<LabeledLogits> scored;
  std::vector<double> logits;
  for (std::size_t i : indices) {
    const auto truth = target_index.find(rows[i].intent);
    if (truth == target_index.end()) continue;
    model.logits(rows[i].model_input, logits);
    const double floor =
        logits.empty() ? 0.0 : *std::min_element(logits.begin(), logits.end()) - 30.0;
    LabeledLogits example;
    example.label = truth->second;
    example.logits.assign(label_order.size(), floor);
    for (std::size_t k = 0; k < label_order.size(); ++k) {
      if (const auto it = model_index.find(label_order[k]); it != model_index.end()) {
        example.logits[k] = logits[static_cast<std::size_t>(it->second)];
      }
    }
    scored.push_back(std::move(example));
  }
  return scored;
}

double accuracy_of(const IntentModel& model, const std::vector<PreparedRow>& rows,
                   const std::vector<std::size_t>& indices) {
  if (indices.empty()) return 0.0;
  std::vector<double> logits;
  std::size_t correct = 0;
  for (std::size_t i : indices) {
    model.logits(rows[i].model_input, logits);
    if (logits.empty()) continue;
    const auto best =
        static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (model.labels()[best] == rows[i].intent) ++correct;
  }
  return static_cast<double>(correct) / static_cast<double>(indices.size());
}

// The features the out-of-scope score combines, kept by their measured AUROC on banking77 with
// held-out intents and on KUAKE-QIC's own __oos__ (DESIGN-NOTES.md, "out-of-scope score").
const std::vector<OosFeature>& kept_oos_features() {
  static const std::vector<OosFeature> kept = {
      OosFeature::kMaxProbability,      OosFeature::kMargin,
      OosFeature::kNegEntropy,          OosFeature::kMaxLogit,
      OosFeature::kNeighbourSimilarity, OosFeature::kNeighbourAgreement,
      OosFeature::kIntentSimilarity};
  return kept;
}

// The neighbour index and intent centroids over the sentence vectors of `model` for the
// in-scope rows[indices] (label indices in the model's order; rows whose label the model lacks
// are left out).
std::pair<NeighbourIndex, IntentCentroids> neighbours_of(const IntentModel& model,
                                                         const std::vector<PreparedRow>& rows,
                                                         const std::vector<std::size_t>& indices) {
  std::map<std::string, int> label_index;
  for (std::size_t i = 0; i < model.labels().size(); ++i) {
    label_index[model.labels()[i]] = static_cast<int>(i);
  }
  std::vector<float> vectors;
  std::vector<int> intents;
  std::vector<double> logits;
  std::vector<float> vector;
  for (std::size_t i : indices) {
    const auto it = label_index.find(rows[i].intent);
    if (it == label_index.end() || rows[i].intent == kOutOfScopeIntent) continue;
    model.logits(rows[i].model_input, logits, vector);
    vectors.insert(vectors.end(), vector.begin(), vector.end());
    intents.push_back(it->second);
  }
  IntentCentroids centroids =
      IntentCentroids::build(model.dim(), vectors, intents, model.labels().size());
  return {NeighbourIndex::build(model.dim(), vectors, std::move(intents)), std::move(centroids)};
}

// One example per row of `indices` with usable tokens; `sources` gets each example's row index.
void add_oos_examples(const IntentModel& model, const OosScorer& features_of,
                      const std::vector<PreparedRow>& rows, const std::vector<std::size_t>& indices,
                      bool in_scope, std::vector<OosExample>& out,
                      std::vector<std::size_t>& sources) {
  std::vector<double> logits;
  std::vector<float> vector;
  for (std::size_t i : indices) {
    model.logits(rows[i].model_input, logits, vector);
    if (logits.empty()) continue;
    const auto top =
        static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back({features_of.features(logits, top, vector), in_scope});
    sources.push_back(i);
  }
}

// The held-out-intent negatives as the served engine would see them, for `calibrate --oos-share`
// on data without __oos__ rows: intent and calibrated confidence from the auxiliary model, times
// P(in scope) from a logistic fitted on the other half of the examples (2-fold cross-fitting:
// the served score has seen these rows, so its own in_scope would flatter them). `sources[k]`
// is the row examples[k] came from (add_oos_examples).
std::vector<SyntheticOosRow> synthetic_out_of_scope(
    const IntentModel& aux, const Calibrator& calibrator, const std::vector<PreparedRow>& rows,
    const std::vector<OosExample>& examples, const std::vector<std::size_t>& sources,
    const OosFitOptions& fit_options, std::mt19937_64& rng) {
  std::vector<int> fold(examples.size());
  for (std::size_t i = 0; i < fold.size(); ++i) fold[i] = static_cast<int>(i % 2);
  std::shuffle(fold.begin(), fold.end(), rng);
  std::array<OosScorer, 2> half;
  for (int f = 0; f < 2; ++f) {
    std::vector<OosExample> fitting;
    for (std::size_t i = 0; i < examples.size(); ++i) {
      if (fold[i] != f) fitting.push_back(examples[i]);
    }
    half[static_cast<std::size_t>(f)] = OosScorer::fit(fitting, fit_options, {}, {}, {});
  }
  std::vector<SyntheticOosRow> out;
  std::vector<double> logits;
  std::vector<float> vector;
  std::vector<double> scratch;
  for (std::size_t k = 0; k < examples.size(); ++k) {
    const PreparedRow& row = rows[sources[k]];
    // Negatives only, and not the data's own __oos__ rows: calibrate uses real ones as they are.
    if (examples[k].in_scope || row.intent == kOutOfScopeIntent) continue;
    aux.logits(row.model_input, logits, vector);
    const CalibratedTop2 top = calibrator.apply(logits, scratch);
    const double in_scope = half[static_cast<std::size_t>(fold[k])].in_scope(examples[k].features);
    out.push_back({aux.labels()[static_cast<std::size_t>(top.first)], top.confidence * in_scope});
  }
  return out;
}

// Fits the out-of-scope score. Real out-of-scope questions are rare in training data, so the
// negatives are mostly synthetic but realistic: an auxiliary model is trained without a quarter
// of the in-scope intents (seeded draw), and the rows of those intents, which it has never seen,
// play the out-of-scope questions; the data's own __oos__ rows join them. Positives are rows of
// the remaining intents the auxiliary model did not train on. The logistic weights learnt on the
// auxiliary model's features are then served with the final model's features and a neighbour
// index over its own training rows (the auxiliary model has no __oos__ label even when the data
// has one: its job is to show what an unseen question looks like to a model). Returns no scorer
// when the data cannot support the fit.
std::optional<OosScorer> fit_oos_score(const TrainOptions& options,
                                       const std::vector<PreparedRow>& rows,
                                       const std::vector<std::size_t>& train_part,
                                       const std::vector<std::size_t>& holdout_part,
                                       const std::vector<std::string>& in_scope,
                                       const FastTextParams& params, const IntentModel& model,
                                       const Calibrator& calibrator,
                                       const std::filesystem::path& scratch_file,
                                       std::mt19937_64& rng, std::vector<std::string>& warnings) {
  if (in_scope.size() < 3) {
    warnings.push_back("fewer than 3 in-scope intents: no out-of-scope score");
    return std::nullopt;
  }
  std::vector<std::string> shuffled = in_scope;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const std::size_t held_out_count =
      std::clamp<std::size_t>((in_scope.size() + 2) / 4, 1, in_scope.size() - 2);
  const std::set<std::string> held_out(
      shuffled.begin(), shuffled.begin() + static_cast<std::ptrdiff_t>(held_out_count));
  std::vector<std::size_t> known;
  std::vector<std::size_t> negatives;
  std::size_t real_oos = 0;
  for (const std::vector<std::size_t>* part : {&train_part, &holdout_part}) {
    for (std::size_t i : *part) {
      if (rows[i].intent == kOutOfScopeIntent) {
        negatives.push_back(i);
        ++real_oos;
      } else if (held_out.contains(rows[i].intent)) {
        negatives.push_back(i);
      } else if (part == &train_part) {
        known.push_back(i);
      }
    }
  }
  std::vector<std::size_t> aux_train;
  std::vector<std::size_t> positives;
  stratified_split(rows, known, 0.2, rng, aux_train, positives);
  for (std::size_t i : holdout_part) {
    if (rows[i].intent != kOutOfScopeIntent && !held_out.contains(rows[i].intent)) {
      positives.push_back(i);
    }
  }
  if (positives.empty() || negatives.empty()) {
    warnings.push_back("too few rows for the out-of-scope score; none fitted");
    return std::nullopt;
  }
  if (Status s = write_fasttext_file(scratch_file, rows, aux_train); !s) {
    warnings.push_back("no out-of-scope score: " + s.error().message);
    return std::nullopt;
  }
  auto aux = IntentModel::train(scratch_file, params);
  std::error_code ec;
  std::filesystem::remove(scratch_file, ec);
  if (!aux) {
    warnings.push_back("auxiliary model for the out-of-scope score failed: " + aux.error().message);
    return std::nullopt;
  }
  OosFitOptions fit_options;
  fit_options.features = kept_oos_features();
  fit_options.assumed_oos_share = options.assumed_oos_share;
  auto [aux_index, aux_centroids] = neighbours_of(**aux, rows, aux_train);
  const OosScorer aux_features =
      OosScorer::fit({}, fit_options, std::move(aux_index), std::move(aux_centroids), {});
  std::vector<OosExample> examples;
  std::vector<std::size_t> sources;
  add_oos_examples(**aux, aux_features, rows, positives, true, examples, sources);
  add_oos_examples(**aux, aux_features, rows, negatives, false, examples, sources);

  nlohmann::json held_out_json = nlohmann::json::array();
  for (const std::string& intent : held_out) held_out_json.push_back(intent);
  nlohmann::json fit_info = {{"negatives_from",
                              {{"held_out_intents", held_out_json},
                               {"held_out_intent_rows", negatives.size() - real_oos},
                               {"oos_rows", real_oos}}},
                             {"auxiliary_train_rows", aux_train.size()}};
  auto [index, centroids] = neighbours_of(model, rows, train_part);
  OosScorer scorer = OosScorer::fit(examples, fit_options, std::move(index), std::move(centroids),
                                    std::move(fit_info));
  scorer.set_synthetic_out_of_scope(synthetic_out_of_scope(**aux, calibrator, rows, examples,
                                                           sources, fit_options, rng));
  return scorer;
}

}  // namespace

Result<TrainReport> train_intent_model(const TrainOptions& options) {
  const Clock::time_point started = Clock::now();
  const double cpu_started = process_cpu_seconds();
  if (!(options.holdout >= 0.0 && options.holdout <= 0.5)) {
    return Error{"invalid_argument",
                 "holdout must be in [0, 0.5], got " + std::to_string(options.holdout)};
  }
  if (options.out_dir.empty()) return Error{"invalid_argument", "no output directory given"};

  auto examples = read_intent_examples(options.data_path);
  if (!examples) return examples.error();
  TrainReport report;
  report.rows = examples->size();

  // Answers: the first non-empty answer of each intent's rows, then the FAQ file on top.
  std::map<std::string, std::string> answers;
  for (const IntentExample& example : *examples) {
    if (example.answer.empty() || example.intent == kOutOfScopeIntent) continue;
    const auto [it, inserted] = answers.emplace(example.intent, example.answer);
    if (!inserted && it->second != example.answer) {
      report.warnings.push_back(options.data_path.string() + ":" + std::to_string(example.line) +
                                ": second answer for intent \"" + example.intent +
                                "\" ignored (the first one is used)");
    }
  }
  if (options.answers_path) {
    auto faq = read_answer_table(*options.answers_path);
    if (!faq) return faq.error();
    for (auto& [intent, answer] : *faq) answers[intent] = std::move(answer);
  }

  // Refuse a foreign output directory before spending time on training.
  if (std::error_code ec; std::filesystem::exists(options.out_dir, ec) &&
                          !std::filesystem::exists(options.out_dir / kManifestFileName, ec) &&
                          !(std::filesystem::is_directory(options.out_dir, ec) &&
                            std::filesystem::is_empty(options.out_dir, ec))) {
    return Error{
        "invalid_argument",
        options.out_dir.string() + ": exists and is not a model directory; not overwriting it"};
  }

  // Normalise once; the same settings are stored with the model.
  const TextNormalizer normalizer(options.normalizer);
  std::vector<PreparedRow> rows;
  rows.reserve(examples->size());
  std::map<std::string, std::size_t> rows_per_intent;
  for (const IntentExample& example : *examples) {
    PreparedRow row{normalizer.to_model_input(example.text), example.intent};
    if (row.model_input.empty()) {
      return Error{"data_invalid", options.data_path.string() + ":" + std::to_string(example.line) +
                                       ": text has no words after normalisation"};
    }
    ++rows_per_intent[row.intent];
    rows.push_back(std::move(row));
  }
  std::vector<std::string> in_scope;
  for (const auto& [intent, count] : rows_per_intent) {
    if (intent != kOutOfScopeIntent) in_scope.push_back(intent);
  }
  if (in_scope.size() < 2) {
    return Error{"data_invalid",
                 options.data_path.string() + ": needs at least 2 in-scope intents (besides " +
                     std::string(kOutOfScopeIntent) + "), found " +
                     std::to_string(in_scope.size()) +
                     (in_scope.empty() ? std::string() : " (\"" + in_scope.front() + "\")")};
  }
  report.intents = rows_per_intent.size();
  report.oos_rows = rows_per_intent.count(std::string(kOutOfScopeIntent)) > 0
                        ? rows_per_intent[std::string(kOutOfScopeIntent)]
                        : 0;
  for (const std::string& intent : in_scope) {
    if (!answers.contains(intent)) {
      report.warnings.push_back("intent \"" + intent + "\" has no answer; it is never answerable");
    }
  }
  for (auto it = answers.begin(); it != answers.end();) {
    if (!rows_per_intent.contains(it->first)) {
      report.warnings.push_back("answer for unknown intent \"" + it->first + "\" ignored");
      it = answers.erase(it);
    } else {
      ++it;
    }
  }

  // Splits: holdout (calibration + metrics), and inside training a validation part for the search.
  std::mt19937_64 rng(options.seed);
  std::vector<std::size_t> all(rows.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::size_t> train_part;
  std::vector<std::size_t> holdout_part;
  stratified_split(rows, all, options.holdout, rng, train_part, holdout_part);
  report.train_rows = train_part.size();
  report.holdout_rows = holdout_part.size();
  for (std::size_t i : holdout_part) report.holdout_examples.push_back((*examples)[i]);

  // Staging folder next to the target so the final rename stays on one file system.
  const std::filesystem::path target = std::filesystem::absolute(options.out_dir);
  StagingDirectory staging(target);
  if (Status s = staging.create(); !s) return s.error();
  std::error_code ec;
  const std::filesystem::path train_file = staging.path() / "train.txt";

  int word_vectors_dim = 0;
  if (options.word_vectors) {
    auto width = word_vectors_width(*options.word_vectors);
    if (!width) return width.error();
    word_vectors_dim = *width;
  }

  // Hyper-parameter search on a validation split of the training part.
  const int fasttext_seed = static_cast<int>(options.seed % 1000003);
  FastTextParams chosen;
  const Clock::time_point search_started = Clock::now();
  // Pretrained word vectors fix the width of every model trained here, the grid's and the
  // out-of-scope score's auxiliary one alike.
  const auto with_word_vectors = [&](FastTextParams params) {
    if (word_vectors_dim > 0) {
      params.pretrained_vectors = std::filesystem::absolute(*options.word_vectors).string();
      params.dim = word_vectors_dim;
    }
    return params;
  };
  if (options.fixed_params) {
    chosen = with_word_vectors(*options.fixed_params);
  } else {
    std::vector<std::size_t> search_train;
    std::vector<std::size_t> validation;
    stratified_split(rows, train_part, kValidationFraction, rng, search_train, validation);
    if (search_train.size() > kMaxSearchRows) {  // big sets: rank candidates on a subsample
      std::vector<std::size_t> subsample;
      std::vector<std::size_t> dropped;
      const double drop =
          1.0 - static_cast<double>(kMaxSearchRows) / static_cast<double>(search_train.size());
      stratified_split(rows, search_train, drop, rng, subsample, dropped);
      search_train = std::move(subsample);
    }
    report.validation_rows = validation.size();
    std::size_t training_tokens = 0;
    for (std::size_t i : train_part) {
      training_tokens += 1 + static_cast<std::size_t>(std::count(rows[i].model_input.begin(),
                                                                 rows[i].model_input.end(), ' '));
    }
    std::vector<FastTextParams> grid = search_grid(train_part.size(), training_tokens, fasttext_seed);
    for (FastTextParams& params : grid) params = with_word_vectors(params);
    chosen = grid.front();
    if (options.autotune_budget_s > 0 && !validation.empty()) {
      if (Status s = write_fasttext_file(train_file, rows, search_train); !s) return s.error();
      double best_accuracy = -1.0;
      double predicted_spent_s = 0.0;
      Progress progress("train: hyper-parameter search, candidate", grid.size());
      for (const FastTextParams& candidate : grid) {
        progress.advance();
        const double predicted_s =
            predicted_cpu_seconds(candidate, rows, search_train, rows_per_intent.size());
        if (!report.trials.empty() && predicted_spent_s + predicted_s > options.autotune_budget_s) {
          continue;  // a cheaper later candidate may still fit
        }
        predicted_spent_s += predicted_s;
        const double trial_started = process_cpu_seconds();
        auto model = IntentModel::train(train_file, candidate);
        if (!model) return model.error();
        SearchTrial trial{candidate, accuracy_of(**model, rows, validation),
                          process_cpu_seconds() - trial_started, predicted_s};
        report.trials.push_back(trial);
        if (trial.validation_accuracy > best_accuracy) {  // ties keep the earlier one
          best_accuracy = trial.validation_accuracy;
          chosen = candidate;
        }
      }
    }
  }
  report.search_seconds = seconds_since(search_started);
  report.params = chosen;

  // Final model on the whole training part.
  if (Status s = write_fasttext_file(train_file, rows, train_part); !s) return s.error();
  auto trained = IntentModel::train(train_file, chosen);
  if (!trained) return trained.error();
  std::unique_ptr<IntentModel> model = std::move(trained.value());
  if (options.quantize) {
    if (Status s = model->quantize(train_file, options.quantize_params); !s) return s.error();
  }

  // Calibration data: a big set fits on its holdout (hundreds of rows); a small FAQ, whose
  // holdout is a few dozen rows, fits on out-of-fold predictions of k-fold cross-validation over
  // the training part, and its holdout then measures the calibrated model out of sample.
  std::vector<LabeledLogits> calibration_examples;
  if (train_part.size() <= kCrossFitMaxRows && !holdout_part.empty()) {
    report.calibration_source = "cross_validation";
    std::vector<std::vector<std::size_t>> folds(kCalibrationFolds);
    {
      std::vector<std::size_t> remaining = train_part;
      for (int fold = kCalibrationFolds; fold > 1; --fold) {  // stratified: peel 1/fold each time
        std::vector<std::size_t> kept;
        stratified_split(rows, remaining, 1.0 / fold, rng, kept,
                         folds[static_cast<std::size_t>(fold - 1)]);
        remaining = std::move(kept);
      }
      folds[0] = std::move(remaining);
    }
    const std::filesystem::path fold_file = staging.path() / "fold.txt";
    for (const std::vector<std::size_t>& fold : folds) {
      if (fold.empty()) continue;
      const std::set<std::size_t> out_of_fold(fold.begin(), fold.end());
      std::vector<std::size_t> in_fold;
      for (std::size_t i : train_part) {
        if (!out_of_fold.contains(i)) in_fold.push_back(i);
      }
      if (Status s = write_fasttext_file(fold_file, rows, in_fold); !s) return s.error();
      // Fold models stay unquantised (product quantisation costs seconds each); the holdout
      // metrics below are measured on the served, quantised model.
      auto fold_model = IntentModel::train(fold_file, chosen);
      if (!fold_model) return fold_model.error();
      std::vector<LabeledLogits> scored = scored_logits(**fold_model, model->labels(), rows, fold);
      std::move(scored.begin(), scored.end(), std::back_inserter(calibration_examples));
    }
    std::filesystem::remove(fold_file, ec);
  } else {
    report.calibration_source = "holdout";
    calibration_examples = scored_logits(*model, model->labels(), rows, holdout_part);
  }
  std::filesystem::remove(train_file, ec);
  report.calibration = fit_calibration(calibration_examples, options.seed);

  // Holdout metrics of the model as served (quantised or not) with its calibrator.
  {
    const std::vector<LabeledLogits> holdout =
        scored_logits(*model, model->labels(), rows, holdout_part);
    std::vector<double> raw;
    std::vector<double> calibrated;
    std::vector<bool> correct;
    std::vector<double> scratch;
    for (const LabeledLogits& example : holdout) {
      const CalibratedTop2 top = report.calibration.calibrator.apply(example.logits, scratch);
      raw.push_back(top.raw_probability);
      calibrated.push_back(top.confidence);
      correct.push_back(top.first == example.label);
    }
    const auto right = static_cast<double>(std::count(correct.begin(), correct.end(), true));
    report.holdout_accuracy = correct.empty() ? 0.0 : right / static_cast<double>(correct.size());
    report.holdout_ece_before = expected_calibration_error(raw, correct);
    // On the fitting data itself the honest figure is the cross-fitted one.
    report.holdout_ece_after = report.calibration_source == "holdout"
                                   ? report.calibration.ece_after
                                   : expected_calibration_error(calibrated, correct);
    report.holdout_reliability = reliability_table(calibrated, correct);
  }
  if (holdout_part.empty()) {
    report.warnings.push_back("no holdout: confidences are the model's raw probabilities");
  }

  std::optional<OosScorer> oos_scorer;
  if (options.oos_score) {
    oos_scorer = fit_oos_score(options, rows, train_part, holdout_part, in_scope, chosen, *model,
                               report.calibration.calibrator,
                               staging.path() / "oos-aux.txt", rng, report.warnings);
  }

  // Files.
  report.model_file = options.quantize ? "model.ftz" : "model.bin";
  if (Status s = model->save(staging.path() / report.model_file); !s) return s.error();

  nlohmann::json labels_json = nlohmann::json::array();
  for (const std::string& label : model->labels()) {
    labels_json.push_back({{"intent", label}, {"rows", rows_per_intent[label]}});
  }
  nlohmann::json answers_json = nlohmann::json::object();
  for (const auto& [intent, answer] : answers) answers_json[intent] = answer;
  nlohmann::json calibration_json = report.calibration.to_json();
  calibration_json["calibrated_on"] = report.calibration_source;
  calibration_json["holdout"] = {{"rows", report.holdout_rows},
                                 {"accuracy", report.holdout_accuracy},
                                 {"ece_before", report.holdout_ece_before},
                                 {"ece_after", report.holdout_ece_after},
                                 {"reliability", reliability_to_json(report.holdout_reliability)}};
  const std::vector<std::pair<std::string, nlohmann::json>> json_files = {
      {"labels.json", {{"labels", labels_json}, {"out_of_scope", std::string(kOutOfScopeIntent)}}},
      {"answers.json", answers_json},
      {"normalizer.json", options.normalizer.to_json()},
      {"calibration.json", calibration_json},
  };
  for (const auto& [name, json] : json_files) {
    if (Status s = write_json(staging.path() / name, json); !s) return s.error();
  }

  std::vector<std::string> file_names = {report.model_file, "labels.json", "answers.json",
                                         "normalizer.json", "calibration.json"};
  if (oos_scorer) {
    if (Status s = oos_scorer->save(staging.path()); !s) return s.error();
    file_names.emplace_back(kOosScoreFile);
    file_names.emplace_back(kOosNeighboursFile);
    report.oos_score = true;
    report.oos_fit = oos_scorer->fit_info();
  }

  ModelManifest manifest;
  manifest.created_at = utc_timestamp(false);
  manifest.model_file = report.model_file;
  for (const std::string& name : file_names) {
    auto file = describe_file(staging.path(), name);
    if (!file) return file.error();
    manifest.files.push_back(std::move(file.value()));
  }
  report.model_bytes = manifest.files.front().bytes;
  manifest.model_version = utc_timestamp(true) + "-" + manifest.files.front().xxh64.substr(0, 8);
  report.model_version = manifest.model_version;

  auto data_file = describe_path(options.data_path);
  if (!data_file) return data_file.error();
  manifest.training = {
      {"data_file", options.data_path.string()},
      {"data_bytes", data_file->bytes},
      {"data_xxh64", data_file->xxh64},
      {"rows", report.rows},
      {"train_rows", report.train_rows},
      {"holdout_rows", report.holdout_rows},
      {"validation_rows", report.validation_rows},
      {"oos_rows", report.oos_rows},
      {"intents", report.intents},
      {"in_scope_intents", in_scope.size()},
      {"holdout_fraction", options.holdout},
      {"seed", options.seed},
      {"segmentation", std::string(segmentation_name(options.normalizer.segmentation))}};
  if (options.answers_path) {
    auto answers_file = describe_path(*options.answers_path);
    if (!answers_file) return answers_file.error();
    manifest.training["answers_file"] = options.answers_path->string();
    manifest.training["answers_xxh64"] = answers_file->xxh64;
  }
  manifest.hyperparameters = chosen.to_json();
  if (options.word_vectors) {
    auto vectors_file = describe_path(*options.word_vectors);
    if (!vectors_file) return vectors_file.error();
    manifest.training["word_vectors_file"] = options.word_vectors->string();
    manifest.training["word_vectors_bytes"] = vectors_file->bytes;
    manifest.training["word_vectors_xxh64"] = vectors_file->xxh64;
  }
  manifest.hyperparameters["quantized"] = options.quantize;
  if (options.quantize) {
    manifest.hyperparameters["quantize"] = {{"cutoff", options.quantize_params.cutoff},
                                            {"retrain", options.quantize_params.retrain},
                                            {"dsub", options.quantize_params.dsub},
                                            {"qnorm", options.quantize_params.qnorm}};
  }
  nlohmann::json trials = nlohmann::json::array();
  for (const SearchTrial& trial : report.trials) {
    trials.push_back({{"params", trial.params.to_json()},
                      {"validation_accuracy", trial.validation_accuracy},
                      {"cpu_seconds", trial.seconds},
                      {"predicted_cpu_seconds", trial.predicted_seconds}});
  }
  manifest.hyperparameters["search"] = {{"budget_s", options.autotune_budget_s},
                                        {"seconds", report.search_seconds},
                                        {"validation_rows", report.validation_rows},
                                        {"fixed", options.fixed_params.has_value()},
                                        {"trials", trials}};
  manifest.holdout_metrics = {
      {"rows", report.holdout_rows},
      {"accuracy", report.holdout_accuracy},
      {"ece_before", report.holdout_ece_before},
      {"ece_after", report.holdout_ece_after},
      {"calibrated_on", report.calibration_source},
      {"calibration_rows", report.calibration.examples},
      {"calibration", std::string(calibration_method_name(report.calibration.calibrator.method()))},
      {"temperature", report.calibration.calibrator.temperature()}};
  // Says whether the engine's confidence includes the out-of-scope score (older directories
  // lack this block and load without it).
  manifest.holdout_metrics["oos_score"] =
      oos_scorer ? nlohmann::json{{"file", std::string(kOosScoreFile)},
                                  {"assumed_oos_share", oos_scorer->assumed_oos_share()},
                                  {"auroc", report.oos_fit.value("auroc", nlohmann::json())}}
                 : nlohmann::json{{"file", nullptr}};
  if (Status s = write_manifest(staging.path(), manifest); !s) return s.error();

  if (Status s = replace_model_directory(staging.path(), target); !s) return s.error();
  staging.release();
  report.out_dir = target;
  report.total_seconds = seconds_since(started);
  report.total_cpu_seconds = process_cpu_seconds() - cpu_started;
  return report;
}

}  // namespace hengshi::edge
