// Trains a versioned intent model directory from JSON Lines rows {"text", "intent", "answer"?}
// (`hengshi train`). The directory holds:
//   manifest.json    format, version, data hash, row counts, hyper-parameters, holdout metrics,
//                    and the size + xxh64 of every file below (model_manifest.h)
//   model.bin        fastText model (model.ftz when quantised)
//   labels.json      intents in model order with row counts, and the out-of-scope label
//   answers.json     intent → canned answer
//   normalizer.json  text normalisation settings used for training (text_normalizer.h)
//   calibration.json calibrator (identity | temperature | isotonic), chosen by cross-fitted ECE
//                    on the holdout, or on out-of-fold predictions for small sets; with ECE and
//                    reliability tables
//   oos_score.json   out-of-scope score (oos_score.h): logistic weights over the kept features,
//                    the assumed out-of-scope share, and how it was fitted (negatives, AUROCs)
//   oos_neighbours.hnsw  sentence vectors of the training rows for its neighbour features
// The directory is written to a sibling staging folder and renamed into place, so a failed run
// never leaves a half-written model where a good one was.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "edge/calibration.h"
#include "edge/intent_dataset.h"
#include "edge/intent_model.h"
#include "edge/text_normalizer.h"

namespace hengshi::edge {

struct TrainOptions {
  std::filesystem::path data_path;
  std::filesystem::path out_dir;
  double holdout = 0.1;   // stratified share of rows held out for calibration and metrics, [0, 0.5]
  bool quantize = false;  // write model.ftz (product-quantised) instead of model.bin
  std::optional<std::filesystem::path> answers_path;  // rows {"intent", "answer"}; wins over rows'
  std::uint64_t seed = 1;
  // Budget of the hyper-parameter search in CPU seconds, as *predicted* by a cost model of
  // fastText's work (input rows × epochs; about right on the 2-core development box), so the grid
  // points that run — and therefore the model — do not depend on machine load. Grid points run
  // in order while their predicted cost fits; the first always runs. The search trains on at most
  // 4000 rows of a stratified 85/15 split of the training part. 0 = no search: the first grid
  // point is used.
  double autotune_budget_s = 30;
  NormalizerSettings normalizer;
  // Skips the search and trains with exactly these parameters (benchmarks, experiments).
  std::optional<FastTextParams> fixed_params;
  QuantizeParams quantize_params;
  // Fit the out-of-scope score (oos_score.h). Costs one auxiliary fastText training on the
  // training part without a quarter of its intents, whose rows become out-of-scope negatives
  // (with the data's own __oos__ rows). Off: the model directory has no oos_score.json and the
  // engine's confidence is the calibrated intent confidence alone.
  bool oos_score = true;
  // The out-of-scope share P(in scope) is stated for (the test traffic had 18%). Higher
  // values are stricter with unseen questions but also with in-scope ones carrying unseen words
  // (a phone number after an FAQ question); DESIGN-NOTES.md has the measured trade-off.
  double assumed_oos_share = 0.2;
  // Pretrained word vectors (.vec text: a "words width" header, then one word and its floats per
  // line) that every fastText training starts from, so words the FAQ rows never used still land
  // near their synonyms; the model's dim becomes the file's width. scripts/fetch-word-vectors
  // makes one for English from npm. Recorded in the manifest with its size and xxh64.
  std::optional<std::filesystem::path> word_vectors;
};

struct SearchTrial {
  FastTextParams params;
  double validation_accuracy = 0;
  double seconds = 0;            // CPU seconds it took
  double predicted_seconds = 0;  // CPU seconds the budget accounted for it
};

struct TrainReport {
  std::filesystem::path out_dir;
  std::string model_version;
  std::string model_file;  // "model.bin" or "model.ftz"
  std::uint64_t model_bytes = 0;
  std::size_t rows = 0;        // all rows read
  std::size_t train_rows = 0;  // rows the final model was trained on
  std::size_t holdout_rows = 0;
  std::size_t validation_rows = 0;  // part of train_rows, used only by the search
  std::size_t oos_rows = 0;         // rows labelled __oos__ (all splits)
  std::size_t intents = 0;          // distinct labels including __oos__ if present
  FastTextParams params;            // chosen
  std::vector<SearchTrial> trials;
  double holdout_accuracy = 0;    // served model (quantised if asked) on the holdout
  double holdout_ece_before = 0;  // raw probabilities on the holdout
  double holdout_ece_after = 0;   // calibrated, never measured on the calibrator's own data
  std::vector<ReliabilityBin> holdout_reliability;  // calibrated confidences on the holdout
  // "holdout" (training part > 3000 rows: fitted on the holdout, ECE after is cross-fitted) or
  // "cross_validation" (fitted on 5-fold out-of-fold predictions of the training part; the
  // holdout stays untouched for the metrics above).
  std::string calibration_source;
  CalibrationFit calibration;                   // the fit itself, on its own data
  double search_seconds = 0;                    // wall
  double total_seconds = 0;                     // wall
  double total_cpu_seconds = 0;                 // CPU of this process while training
  std::vector<IntentExample> holdout_examples;  // the held-out rows, e.g. to pick thresholds
  bool oos_score = false;                       // oos_score.json written
  nlohmann::json oos_fit = nlohmann::json::object();  // its "fit" block (sources, AUROCs)
  std::vector<std::string> warnings;            // e.g. intents without an answer
};

// Errors: "data_invalid" (names file and line: empty file, invalid JSON, missing/empty text or
// intent, text empty after normalisation, fewer than 2 in-scope intents), "invalid_argument",
// "train_failed", "io_error".
Result<TrainReport> train_intent_model(const TrainOptions& options);

}  // namespace hengshi::edge
