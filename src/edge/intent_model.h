// The narrow boundary around fastText: only intent_model.cc includes <fasttext/...>. An
// IntentModel is a trained supervised fastText classifier that yields the *logits* of all labels
// (not fastText's floored, float-saturated log-probabilities), so calibration keeps resolution
// among near-certain predictions. Inference uses fastText's dictionary (tokens, word n-grams,
// sub-words → rows) and a compact int8 copy of the input matrix built at load/train time; the
// fastText matrices are kept for save() and quantize().
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

// fastText supervised hyper-parameters that the trainer searches over (softmax loss: calibration
// needs a proper distribution over labels; one-vs-all only for measuring it as an out-of-scope
// candidate, bench/router.cc — such a model does not load as a served model).
struct FastTextParams {
  double lr = 0.5;
  int epoch = 25;
  int dim = 64;
  int word_ngrams = 2;
  int minn = 0;  // character n-grams of words, 0 = off
  int maxn = 0;
  int bucket = 100000;  // hash buckets for word and character n-grams
  int threads = 1;      // 1 keeps training deterministic for a given seed
  int seed = 1;
  bool one_vs_all = false;  // `-loss ova`: independent sigmoids per label
  // Word vectors to start from (fastText's -pretrainedVectors, a .vec text file); empty = random.
  // dim must equal the file's width (the trainer sets it from the file's header).
  std::string pretrained_vectors;

  nlohmann::json to_json() const;
};

// The width of a .vec word-vector file (FastTextParams::pretrained_vectors), from its
// "<words> <width>" header line. Errors: "invalid_argument" (cannot open, no such header).
Result<int> word_vectors_width(const std::filesystem::path& path);

// Defaults measured on banking77 (bench/edge_intent.cc): pruning to the 10k rows of largest norm
// keeps holdout accuracy (0.905 vs 0.904 at 30k) and makes product quantisation several times
// faster than quantising every bucket.
struct QuantizeParams {
  std::size_t cutoff = 10000;  // keep only the `cutoff` input rows of largest norm (0 = all)
  bool retrain = false;        // fine-tune after pruning (only with cutoff; costs a training)
  int dsub = 2;                // product-quantiser sub-vector size
  bool qnorm = true;
};

class IntentModel {
 public:
  ~IntentModel();
  IntentModel(const IntentModel&) = delete;
  IntentModel& operator=(const IntentModel&) = delete;

  // Trains on a fastText supervised file ("__label__X tok tok\n" lines). Errors: code
  // "train_failed".
  static Result<std::unique_ptr<IntentModel>> train(const std::filesystem::path& train_file,
                                                    const FastTextParams& params);
  // Loads model.bin / model.ftz. Errors: code "model_invalid", naming the file.
  static Result<std::unique_ptr<IntentModel>> load(const std::filesystem::path& file);

  // Product-quantises in place (→ .ftz). `train_file` is needed when retraining after a cutoff.
  Status quantize(const std::filesystem::path& train_file, const QuantizeParams& params);
  Status save(const std::filesystem::path& file) const;

  // Label names in logit order, without fastText's "__label__" prefix.
  const std::vector<std::string>& labels() const { return labels_; }
  bool quantized() const;

  // Logits of every label for one normalised model-input line (tokens separated by single
  // spaces, no newline); `logits` is resized to labels().size(). Const and thread-safe: the
  // dictionary and matrices are only read, scratch space is per thread. About 20 µs for a
  // ten-word query (bench/edge_intent.cc).
  void logits(std::string_view model_input, std::vector<double>& logits) const;
  // The same, and the sentence vector the logits are computed from (the mean of the input rows,
  // dim() floats): the out-of-scope score compares it with the training examples'.
  void logits(std::string_view model_input, std::vector<double>& logits,
              std::vector<float>& sentence_vector) const;
  int dim() const;

 private:
  struct Impl;
  explicit IntentModel(std::unique_ptr<Impl> impl);
  void cache_labels();

  std::unique_ptr<Impl> impl_;
  std::vector<std::string> labels_;
};

}  // namespace hengshi::edge
