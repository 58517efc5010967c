// Out-of-fold predictions of an intent model's own recipe (`hengshi calibrate --cross-fit K`).
//
// A band must clear its precision target on a one-sided lower bound, and a bound over the thousand
// or so rows of a held-out calibration set is wide: at a 0.99 target it keeps the edge to a small
// share, or off. The model's training rows are several times as many. Cross-fitting (the idea of
// cross-conformal prediction and CV+) splits them into K stratified folds and predicts each fold
// with a model trained the same way on the other K-1 folds, so every row is scored by a model that
// never saw it. The fold models follow the manifest: its hyper-parameters (no search), normaliser,
// word vectors, out-of-scope score and its assumed share, holdout fraction, quantisation and seed;
// their confidences mean what the served model's mean, with a little less training data (so the
// evidence errs on the strict side).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"
#include "edge/intent_engine.h"
#include "edge/intent_model.h"

namespace hengshi::edge {

struct CrossFitOptions {
  std::filesystem::path model_dir;  // a `hengshi train` output; its training data must be unchanged
  int folds = 5;                    // K, in [2, 20]
  // Where the fold models are trained (a folder of its own is made inside and removed after);
  // empty = the system's temporary folder.
  std::filesystem::path work_dir;
};

struct OutOfFoldRow {
  std::string text;
  std::string intent;           // the row's label
  IntentPrediction prediction;  // by the fold model trained without this row
  int fold = 0;
};

struct CrossFitReport {
  std::vector<OutOfFoldRow> rows;  // every training row, in the data file's order
  int folds = 0;
  std::filesystem::path data_file;  // the model's training data, as the manifest names it
  double seconds = 0;               // wall time of the K trainings and predictions
};

// The manifest's hyper-parameters as fastText parameters (FastTextParams::to_json's fields).
// Errors: "model_invalid" (a field missing or of the wrong type).
Result<FastTextParams> fast_text_params_from_json(const nlohmann::json& json);

// Errors: "invalid_argument" (folds out of range, fewer rows than folds), "model_invalid" (the
// manifest lacks what the recipe needs), "data_changed" (the training data, answers or word
// vectors are missing or differ from the hashes in the manifest), and the trainer's errors.
Result<CrossFitReport> cross_fit_predictions(const CrossFitOptions& options);

}  // namespace hengshi::edge
