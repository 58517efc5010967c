#include "edge/intent_model.h"

#include <fasttext/fasttext.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hengshi::edge {
namespace {

constexpr std::string_view kLabelPrefix = "__label__";

// fastText 0.9.2 exposes its matrices only to subclasses.
class LogitFastText : public fasttext::FastText {
 public:
  const fasttext::Dictionary& dictionary() const { return *dict_; }
  int64_t input_rows() const { return input_->size(0); }
  int64_t output_rows() const { return output_->size(0); }
  // Row r of the input matrix, decoded (works for dense and product-quantised matrices).
  void input_row(int64_t r, fasttext::Vector& row) const {
    row.zero();
    input_->addRowToVector(row, static_cast<int32_t>(r));
  }
  fasttext::real output_entry(int64_t label, int64_t column, fasttext::Vector& unit) const {
    unit.zero();
    unit[column] = 1.0f;
    return output_->dotRow(unit, label);
  }
};

}  // namespace

// Inference does not go through fastText's predict(): it computes the same hidden vector
// (mean of the input rows of words, word n-grams and sub-words) and the label logits, but from
// a compact copy of the input matrix with one int8 code per weight and a float scale per row.
// The input matrix is read at random rows, so inference is bound by cache misses: int8 rows are
// a quarter of the bytes (one cache line at dim 64), and the logits skip fastText's softmax and
// its log(p + 1e-5) floor, which would erase the ranking among saturated predictions.
struct IntentModel::Impl {
  LogitFastText fasttext;
  int dim = 0;
  std::vector<int8_t> input_codes;  // rows × dim
  std::vector<float> input_scales;  // per row
  std::vector<float> output;        // labels × dim, dense

  void build_compact() {
    dim = fasttext.getDimension();
    const int64_t rows = fasttext.input_rows();
    input_codes.assign(static_cast<std::size_t>(rows * dim), 0);
    input_scales.assign(static_cast<std::size_t>(rows), 0.0f);
    fasttext::Vector row(dim);
    for (int64_t r = 0; r < rows; ++r) {
      fasttext.input_row(r, row);
      float max_abs = 0.0f;
      for (int64_t j = 0; j < dim; ++j) max_abs = std::max(max_abs, std::abs(row[j]));
      if (max_abs == 0.0f) continue;
      const float scale = max_abs / 127.0f;
      input_scales[static_cast<std::size_t>(r)] = scale;
      int8_t* codes = &input_codes[static_cast<std::size_t>(r * dim)];
      for (int64_t j = 0; j < dim; ++j) codes[j] = static_cast<int8_t>(std::lround(row[j] / scale));
    }
    const int64_t labels = fasttext.output_rows();
    output.assign(static_cast<std::size_t>(labels * dim), 0.0f);
    fasttext::Vector unit(dim);
    for (int64_t i = 0; i < labels; ++i) {
      for (int64_t j = 0; j < dim; ++j) {
        output[static_cast<std::size_t>(i * dim + j)] = fasttext.output_entry(i, j, unit);
      }
    }
  }

  void compute_logits(const std::vector<int32_t>& rows, std::vector<float>& hidden,
                      std::vector<double>& logits) const {
    const auto width = static_cast<std::size_t>(dim);
    hidden.assign(width, 0.0f);
    float* __restrict sum = hidden.data();
    constexpr std::size_t kPrefetchDistance = 8;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      if (k + kPrefetchDistance < rows.size()) {
        __builtin_prefetch(
            &input_codes[static_cast<std::size_t>(rows[k + kPrefetchDistance]) * width]);
      }
      const auto r = static_cast<std::size_t>(rows[k]);
      add_scaled(sum, &input_codes[r * width], input_scales[r], width);
    }
    if (!rows.empty()) {
      const float inverse = 1.0f / static_cast<float>(rows.size());
      for (std::size_t j = 0; j < width; ++j) sum[j] *= inverse;
    }
    const std::size_t labels = output.size() / width;
    logits.resize(labels);
    for (std::size_t i = 0; i < labels; ++i) logits[i] = dot(&output[i * width], sum, width);
  }

  // Fixed-size inner blocks let g++ -O2 vectorise (its cheap cost model needs known trip counts).
  static constexpr std::size_t kBlock = 16;

  static void add_scaled(float* __restrict sum, const int8_t* __restrict codes, float scale,
                         std::size_t width) {
    std::size_t j = 0;
    for (; j + kBlock <= width; j += kBlock) {
      for (std::size_t t = 0; t < kBlock; ++t)
        sum[j + t] += scale * static_cast<float>(codes[j + t]);
    }
    for (; j < width; ++j) sum[j] += scale * static_cast<float>(codes[j]);
  }

  static float dot(const float* __restrict a, const float* __restrict b, std::size_t width) {
    float partial[kBlock] = {};
    std::size_t j = 0;
    for (; j + kBlock <= width; j += kBlock) {
      for (std::size_t t = 0; t < kBlock; ++t) partial[t] += a[j + t] * b[j + t];
    }
    float total = 0.0f;
    for (; j < width; ++j) total += a[j] * b[j];
    for (float p : partial) total += p;
    return total;
  }
};

nlohmann::json FastTextParams::to_json() const {
  nlohmann::json json = {{"loss", one_vs_all ? "ova" : "softmax"},
                         {"lr", lr},
                         {"epoch", epoch},
                         {"dim", dim},
                         {"word_ngrams", word_ngrams},
                         {"minn", minn},
                         {"maxn", maxn},
                         {"bucket", bucket},
                         {"threads", threads},
                         {"seed", seed}};
  if (!pretrained_vectors.empty()) {
    json["pretrained_vectors"] = std::filesystem::path(pretrained_vectors).filename().string();
  }
  return json;
}

Result<int> word_vectors_width(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Error{"invalid_argument", path.string() + ": cannot open the word vectors"};
  long long words = 0;
  long long width = 0;
  std::string rest;
  if (!(in >> words >> width) || words < 1 || width < 1 || width > 1024 || !std::getline(in, rest) ||
      rest.find_first_not_of(" \t\r") != std::string::npos) {
    return Error{"invalid_argument",
                 path.string() + ": not a .vec word-vector file (its first line must be \"<words> <width>\")"};
  }
  return static_cast<int>(width);
}

IntentModel::IntentModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  cache_labels();
  impl_->build_compact();
}
IntentModel::~IntentModel() = default;

void IntentModel::cache_labels() {
  labels_.clear();
  const fasttext::Dictionary& dict = impl_->fasttext.dictionary();
  for (int32_t i = 0; i < dict.nlabels(); ++i) {
    std::string label = dict.getLabel(i);
    if (label.starts_with(kLabelPrefix)) label.erase(0, kLabelPrefix.size());
    labels_.push_back(std::move(label));
  }
}

Result<std::unique_ptr<IntentModel>> IntentModel::train(const std::filesystem::path& train_file,
                                                        const FastTextParams& params) {
  fasttext::Args args;
  args.input = train_file.string();
  args.model = fasttext::model_name::sup;
  args.loss = params.one_vs_all ? fasttext::loss_name::ova : fasttext::loss_name::softmax;
  args.label = std::string(kLabelPrefix);
  args.minCount = 1;
  args.minCountLabel = 0;
  args.lr = params.lr;
  args.epoch = params.epoch;
  args.dim = params.dim;
  args.wordNgrams = params.word_ngrams;
  args.minn = params.minn;
  args.maxn = params.maxn;
  args.bucket = (params.word_ngrams > 1 || params.maxn > 0) ? params.bucket : 0;
  args.thread = params.threads;
  args.seed = params.seed;
  args.pretrainedVectors = params.pretrained_vectors;
  args.verbose = 0;
  auto impl = std::make_unique<Impl>();
  try {
    impl->fasttext.train(args);
  } catch (const std::exception& e) {
    return Error{"train_failed", train_file.string() + ": fastText training failed: " + e.what()};
  }
  return std::unique_ptr<IntentModel>(new IntentModel(std::move(impl)));
}

Result<std::unique_ptr<IntentModel>> IntentModel::load(const std::filesystem::path& file) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->fasttext.loadModel(file.string());
  } catch (const std::exception& e) {
    return Error{"model_invalid", file.string() + ": cannot load fastText model: " + e.what()};
  }
  if (impl->fasttext.getArgs().model != fasttext::model_name::sup ||
      impl->fasttext.getArgs().loss != fasttext::loss_name::softmax) {
    return Error{"model_invalid", file.string() + ": not a supervised softmax fastText model"};
  }
  return std::unique_ptr<IntentModel>(new IntentModel(std::move(impl)));
}

Status IntentModel::quantize(const std::filesystem::path& train_file,
                             const QuantizeParams& params) {
  fasttext::Args qargs = impl_->fasttext.getArgs();
  qargs.input = train_file.string();
  qargs.output.clear();
  qargs.qout = false;
  qargs.qnorm = params.qnorm;
  qargs.cutoff = params.cutoff;
  qargs.retrain = params.retrain && params.cutoff > 0;
  qargs.dsub = static_cast<std::size_t>(params.dsub);
  qargs.verbose = 0;
  try {
    impl_->fasttext.quantize(qargs);
  } catch (const std::exception& e) {
    return Error{"train_failed",
                 train_file.string() + ": fastText quantisation failed: " + e.what()};
  }
  cache_labels();
  impl_->build_compact();
  return Ok{};
}

Status IntentModel::save(const std::filesystem::path& file) const {
  try {
    // saveModel is not const in fastText's API although it only writes.
    const_cast<LogitFastText&>(impl_->fasttext).saveModel(file.string());
  } catch (const std::exception& e) {
    return Error{"io_error", file.string() + ": cannot save fastText model: " + e.what()};
  }
  return Ok{};
}

bool IntentModel::quantized() const { return impl_->fasttext.isQuant(); }

void IntentModel::logits(std::string_view model_input, std::vector<double>& logits) const {
  thread_local std::vector<float> hidden;
  this->logits(model_input, logits, hidden);
}

int IntentModel::dim() const { return impl_->dim; }

void IntentModel::logits(std::string_view model_input, std::vector<double>& logits,
                         std::vector<float>& sentence_vector) const {
  // The trailing newline makes fastText append its end-of-sentence token, as in training.
  std::string line(model_input);
  line.push_back('\n');
  std::istringstream in(line);
  std::vector<int32_t> words;
  std::vector<int32_t> labels;
  impl_->fasttext.dictionary().getLine(in, words, labels);
  impl_->compute_logits(words, sentence_vector, logits);
}

}  // namespace hengshi::edge
