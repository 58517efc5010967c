// Trains a ComplexityModel (complexity_model.h) from labelled rows — `hengshi train-complexity`
// and bench/router_complexity.cc. A row is hard when the small model answered it wrong.
//
// The logistic part is fitted by Newton's method with an L2 penalty on standardised inputs. The
// fastText log-odds that the fastText kinds feed into it are cross-fitted (each row scored by a
// model that did not see it), so the logistic weight does not learn to trust an over-fitted
// in-sample score; the served fastText model is then trained on all rows. The cut is the score
// above which `large_share` of the training rows fall (cross-fitted scores where fastText is
// involved), so a deployment whose traffic looks like the training data sends about that share
// to cloud-large.
//
// Pure functions apart from fastText's scratch files (in a temporary folder, removed after).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "edge/intent_model.h"
#include "router/complexity_model.h"

namespace hengshi::router {

struct ComplexityRow {
  std::string text;
  bool hard = false;                  // !small_correct
  std::string group;                  // "subject" when present: for held-out-group evaluation
  std::optional<bool> large_correct;  // for cost/quality curves; not used in training
  double weight = 1.0;                // how much the row counts in training (its file's weight)
};

// One data file and how much each of its rows counts: a deployment adds a few hundred labelled
// rows of its own traffic beside a public set, and weights them up.
struct ComplexitySource {
  std::string path;
  double weight = 1.0;  // > 0
};

// "FILE" or "FILE:WEIGHT" (the suffix after the last ':' when it reads as a number > 0).
Result<ComplexitySource> parse_complexity_source(const std::string& text);

// Rows {"text", "small_correct", "subject"?, "large_correct"?} from JSON Lines. Errors:
// "data_invalid" naming the file and line; fewer than 2 rows of either class is an error too.
Result<std::vector<ComplexityRow>> read_complexity_rows(const std::string& path);
// Every file's rows, each with its file's weight; the class check is on the rows together.
// `per_source`, when given, receives each file's row count.
Result<std::vector<ComplexityRow>> read_complexity_rows(const std::vector<ComplexitySource>& sources,
                                                        std::vector<std::size_t>* per_source = nullptr);

// fastText settings for the binary classifier: the labels are noisy (a right answer can be a
// guess), so a small, short-trained model generalises better than the intent model's defaults.
edge::FastTextParams default_complexity_fasttext_params();

struct ComplexityTrainOptions {
  ComplexityKind kind = ComplexityKind::kFeatures;
  double large_share = 0.5;  // [0, 1]: share of rows at or above the cut
  double l2 = 1.0;           // penalty on the standardised weights (not the bias)
  int cross_fit_folds = 3;   // fastText kinds only, >= 2
  std::uint64_t seed = 1;
  edge::FastTextParams fasttext = default_complexity_fasttext_params();
};

struct ComplexityTrainReport {
  std::shared_ptr<const ComplexityModel> model;
  std::size_t rows = 0;
  std::size_t hard_rows = 0;
  // ROC AUC on the training rows, of the scores the cut was fitted on (cross-fitted where
  // fastText is involved, in-sample for the features kind).
  double train_auc = 0;
};

// Errors: "invalid_argument" (share out of range, too few rows of a class), "train_failed".
Result<ComplexityTrainReport> train_complexity_model(const std::vector<ComplexityRow>& rows,
                                                     const ComplexityTrainOptions& options);

// Trains and writes a model directory (staged beside `out_dir`, then renamed into place, so a
// failed run never leaves a half-written model where a good one was).
// The manifest records each file with its xxh64, weight and row count.
Result<ComplexityTrainReport> train_complexity_directory(const std::vector<ComplexitySource>& sources,
                                                         const std::filesystem::path& out_dir,
                                                         const ComplexityTrainOptions& options);
Result<ComplexityTrainReport> train_complexity_directory(const std::string& data_path,
                                                         const std::filesystem::path& out_dir,
                                                         const ComplexityTrainOptions& options);


// The smallest score such that `share` of `scores` are >= it (1 + max for share 0, clamped to
// [0, 1] by the caller where scores are probabilities).
double cut_for_share(std::vector<double> scores, double share);

}  // namespace hengshi::router
