#include "router/complexity_trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

#include "core/json_lines.h"
#include "core/progress.h"
#include "core/sigmoid.h"
#include "edge/model_manifest.h"
#include "edge/oos_score.h"

namespace hengshi::router {
namespace {

using nlohmann::json;

// Removes a scratch or staging folder on every early return.
struct FolderGuard {
  std::filesystem::path path;
  ~FolderGuard() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

std::filesystem::path unique_folder(const std::filesystem::path& parent, std::string_view stem) {
  static std::atomic<int> counter{0};
  return parent / (std::string(stem) + "-" + std::to_string(static_cast<long>(::getpid())) + "-" +
                   std::to_string(counter.fetch_add(1)));
}

// Solves a·x = b (a symmetric positive definite, n small) by Gaussian elimination with partial
// pivoting; `a` and `b` are overwritten.
std::vector<double> solve(std::vector<double> a, std::vector<double> b, std::size_t n) {
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t row = col + 1; row < n; ++row) {
      if (std::abs(a[row * n + col]) > std::abs(a[pivot * n + col])) pivot = row;
    }
    if (pivot != col) {
      for (std::size_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
      std::swap(b[col], b[pivot]);
    }
    const double diagonal = a[col * n + col];
    if (std::abs(diagonal) < 1e-12) continue;
    for (std::size_t row = col + 1; row < n; ++row) {
      const double factor = a[row * n + col] / diagonal;
      if (factor == 0) continue;
      for (std::size_t k = col; k < n; ++k) a[row * n + k] -= factor * a[col * n + k];
      b[row] -= factor * b[col];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t i = n; i-- > 0;) {
    double sum = b[i];
    for (std::size_t k = i + 1; k < n; ++k) sum -= a[i * n + k] * x[k];
    const double diagonal = a[i * n + i];
    x[i] = std::abs(diagonal) < 1e-12 ? 0.0 : sum / diagonal;
  }
  return x;
}

// L2-penalised logistic regression on standardised inputs, by Newton's method (a handful of
// inputs: the Hessian is tiny and converges in ~10 steps).
LogisticWeights fit_logistic(const std::vector<std::vector<double>>& inputs,
                             const std::vector<bool>& labels, const std::vector<double>& row_weights,
                             double l2) {
  const std::size_t n = inputs.size();
  const std::size_t d = inputs.empty() ? 0 : inputs.front().size();
  LogisticWeights model;
  model.mean.assign(d, 0.0);
  model.scale.assign(d, 1.0);
  model.weights.assign(d, 0.0);
  model.clip = kStandardisedInputCap;
  // Weighted moments and likelihood: a row of weight w counts as w rows. The penalty is scaled
  // to the total weight over n, so weights that are all 1 give exactly the unweighted fit.
  double total = 0;
  for (double w : row_weights) total += w;
  if (!(total > 0)) total = 1;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < d; ++j) model.mean[j] += row_weights[i] * inputs[i][j] / total;
  for (std::size_t j = 0; j < d; ++j) {
    double variance = 0;
    for (std::size_t i = 0; i < n; ++i) {
      variance += row_weights[i] * (inputs[i][j] - model.mean[j]) * (inputs[i][j] - model.mean[j]);
    }
    const double sd = std::sqrt(variance / total);
    model.scale[j] = sd > 1e-9 ? sd : 1.0;
  }
  l2 *= total / static_cast<double>(std::max<std::size_t>(n, 1));
  // z = standardised inputs with a leading 1 for the bias.
  const std::size_t p = d + 1;
  std::vector<double> beta(p, 0.0);
  std::vector<double> z(p);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<double> gradient(p, 0.0), hessian(p * p, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      z[0] = 1.0;
      for (std::size_t j = 0; j < d; ++j) z[j + 1] = model.standardised(j, inputs[i][j]);
      double eta = 0;
      for (std::size_t j = 0; j < p; ++j) eta += beta[j] * z[j];
      const double prob = sigmoid(eta);
      const double residual = row_weights[i] * ((labels[i] ? 1.0 : 0.0) - prob);
      const double weight = row_weights[i] * std::max(prob * (1 - prob), 1e-9);
      for (std::size_t j = 0; j < p; ++j) {
        gradient[j] += residual * z[j];
        for (std::size_t k = 0; k <= j; ++k) hessian[j * p + k] += weight * z[j] * z[k];
      }
    }
    for (std::size_t j = 0; j < p; ++j)
      for (std::size_t k = 0; k < j; ++k) hessian[k * p + j] = hessian[j * p + k];
    for (std::size_t j = 1; j < p; ++j) {
      gradient[j] -= l2 * beta[j];
      hessian[j * p + j] += l2;
    }
    const std::vector<double> step = solve(hessian, gradient, p);
    double largest = 0;
    for (std::size_t j = 0; j < p; ++j) {
      beta[j] += step[j];
      largest = std::max(largest, std::abs(step[j]));
    }
    if (largest < 1e-8) break;
  }
  model.bias = beta[0];
  for (std::size_t j = 0; j < d; ++j) model.weights[j] = beta[j + 1];
  return model;
}

// Trains the binary fastText classifier on `rows[indices]`.
Result<std::unique_ptr<edge::IntentModel>> train_fasttext(
    const std::vector<ComplexityRow>& rows, const std::vector<std::size_t>& indices,
    const std::vector<std::string>& model_inputs, const edge::FastTextParams& params,
    const std::filesystem::path& scratch) {
  const std::filesystem::path file = scratch / "train.txt";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    for (std::size_t i : indices) {
      // fastText has no sample weights: a row of weight w is written round(w) times (at least once).
      const long copies = std::max(1L, std::lround(rows[i].weight));
      for (long copy = 0; copy < copies; ++copy) {
        out << (rows[i].hard ? "__label__hard " : "__label__easy ") << model_inputs[i] << '\n';
      }
    }
    if (!out) return Error{"train_failed", file.string() + ": cannot write"};
  }
  return edge::IntentModel::train(file, params);
}

double log_odds_of(const edge::IntentModel& model, std::string_view input,
                   std::vector<double>& logits) {
  model.logits(input, logits);
  const auto& labels = model.labels();
  const std::size_t hard =
      static_cast<std::size_t>(std::find(labels.begin(), labels.end(), "hard") - labels.begin());
  if (labels.size() != 2 || hard >= 2) return 0;
  return logits[hard] - logits[1 - hard];
}

}  // namespace

// One row {"text", "small_correct", "subject"?, "large_correct"?} appended to `rows`; "" or why not.
static std::string read_complexity_row(const json& row, std::vector<ComplexityRow>& rows) {
  if (!row.is_object()) return "not a JSON object";
  ComplexityRow out;
  if (std::string why = required_string(row, "text", out.text); !why.empty()) return why;
  const auto small = row.find("small_correct");
  if (small == row.end() || !small->is_boolean()) {
    return "field \"small_correct\" missing or not true/false";
  }
  out.hard = !small->get<bool>();
  if (const auto subject = row.find("subject"); subject != row.end() && subject->is_string()) {
    out.group = subject->get<std::string>();
  }
  if (const auto large = row.find("large_correct"); large != row.end()) {
    if (!large->is_boolean()) return "field \"large_correct\" is not true/false";
    out.large_correct = large->get<bool>();
  }
  rows.push_back(std::move(out));
  return "";
}

Result<std::vector<ComplexityRow>> read_complexity_rows(const std::string& path) {
  return read_complexity_rows(std::vector<ComplexitySource>{{path, 1.0}});
}

Result<ComplexitySource> parse_complexity_source(const std::string& text) {
  ComplexitySource source{text, 1.0};
  const auto colon = text.rfind(':');
  if (colon != std::string::npos && colon + 1 < text.size()) {
    const std::string suffix = text.substr(colon + 1);
    char* end = nullptr;
    const double weight = std::strtod(suffix.c_str(), &end);
    if (end != nullptr && *end == '\0' && end != suffix.c_str()) {
      if (!(weight > 0) || !std::isfinite(weight)) {
        return Error{"invalid_argument", text + ": the weight after ':' must be a number > 0"};
      }
      source = {text.substr(0, colon), weight};
    }
  }
  if (source.path.empty()) return Error{"invalid_argument", "empty data file name"};
  return source;
}

Result<std::vector<ComplexityRow>> read_complexity_rows(const std::vector<ComplexitySource>& sources,
                                                        std::vector<std::size_t>* per_source) {
  std::vector<ComplexityRow> rows;
  if (per_source != nullptr) per_source->clear();
  for (const auto& source : sources) {
    std::vector<ComplexityRow> part;
    Status read = for_each_json_line(source.path, [&](const json& row, std::size_t) -> std::string {
      return read_complexity_row(row, part);
    });
    if (!read) return read.error();
    if (per_source != nullptr) per_source->push_back(part.size());
    for (auto& row : part) {
      row.weight = source.weight;
      rows.push_back(std::move(row));
    }
  }
  const auto hard = static_cast<std::size_t>(
      std::count_if(rows.begin(), rows.end(), [](const ComplexityRow& r) { return r.hard; }));
  if (hard < 2 || rows.size() - hard < 2) {
    if (sources.size() == 1) {
      return data_error(sources.front().path, 0, "needs at least 2 hard (small_correct false) and 2 easy rows");
    }
    return Error{"data_invalid", "the data files need at least 2 hard (small_correct false) and 2 easy rows together"};
  }
  return rows;
}

edge::FastTextParams default_complexity_fasttext_params() {
  edge::FastTextParams params;
  params.lr = 0.1;
  params.epoch = 5;
  params.dim = 16;
  params.word_ngrams = 1;
  params.bucket = 100000;
  params.threads = 1;
  return params;
}

double cut_for_share(std::vector<double> scores, double share) {
  if (scores.empty()) return 0;
  std::sort(scores.begin(), scores.end(), std::greater<>());
  if (share <= 0) return scores.front() + 1.0;
  const auto take = static_cast<std::size_t>(std::ceil(share * static_cast<double>(scores.size())));
  return scores[std::min(take, scores.size()) - 1];
}

Result<ComplexityTrainReport> train_complexity_model(const std::vector<ComplexityRow>& rows,
                                                     const ComplexityTrainOptions& options) {
  if (!(options.large_share >= 0 && options.large_share <= 1)) {
    return Error{"invalid_argument", "large_share must be within [0, 1]"};
  }
  if (options.cross_fit_folds < 2) return Error{"invalid_argument", "cross_fit_folds must be >= 2"};
  std::vector<bool> labels;
  for (const auto& row : rows) labels.push_back(row.hard);
  const auto hard = static_cast<std::size_t>(std::count(labels.begin(), labels.end(), true));
  if (hard < 2 || rows.size() - hard < 2) {
    return Error{"invalid_argument", "needs at least 2 hard and 2 easy rows"};
  }

  const bool uses_features = options.kind != ComplexityKind::kFastText;
  const bool uses_fasttext = options.kind != ComplexityKind::kFeatures;
  std::vector<std::vector<double>> inputs(rows.size());
  if (uses_features) {
    Progress progress("train-complexity: features", rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      progress.advance();
      const ComplexityVector v = complexity_vector(rows[i].text, 1);
      inputs[i].assign(v.begin(), v.end());
    }
  }

  std::unique_ptr<edge::IntentModel> fasttext;
  edge::NormalizerSettings normalizer_settings;
  if (uses_fasttext) {
    const edge::TextNormalizer normalizer(normalizer_settings);
    std::vector<std::string> model_inputs;
    model_inputs.reserve(rows.size());
    for (const auto& row : rows) model_inputs.push_back(normalizer.to_model_input(row.text));
    FolderGuard scratch{unique_folder(std::filesystem::temp_directory_path(), "hengshi-complexity")};
    std::error_code ec;
    if (!std::filesystem::create_directories(scratch.path, ec)) {
      return Error{"train_failed", scratch.path.string() + ": cannot create: " + ec.message()};
    }
    edge::FastTextParams params = options.fasttext;
    params.seed = static_cast<int>(options.seed % 1000000007);
    // Cross-fitted log-odds for the logistic part: each row scored by a model that never saw it.
    std::vector<std::size_t> order(rows.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 random(options.seed);
    std::shuffle(order.begin(), order.end(), random);
    const auto folds = static_cast<std::size_t>(options.cross_fit_folds);
    std::vector<double> logits;
    for (std::size_t fold = 0; fold < folds; ++fold) {
      std::vector<std::size_t> train_part, held_part;
      for (std::size_t k = 0; k < order.size(); ++k) {
        (k % folds == fold ? held_part : train_part).push_back(order[k]);
      }
      auto model = train_fasttext(rows, train_part, model_inputs, params, scratch.path);
      if (!model) return model.error();
      for (std::size_t i : held_part) {
        inputs[i].push_back(log_odds_of(**model, model_inputs[i], logits));
      }
    }
    std::vector<std::size_t> all(rows.size());
    std::iota(all.begin(), all.end(), 0);
    auto model = train_fasttext(rows, all, model_inputs, params, scratch.path);
    if (!model) return model.error();
    fasttext = std::move(*model);
  }

  std::vector<double> row_weights;
  row_weights.reserve(rows.size());
  for (const auto& row : rows) row_weights.push_back(row.weight);
  LogisticWeights logistic = fit_logistic(inputs, labels, row_weights, options.l2);
  std::vector<double> scores;
  scores.reserve(rows.size());
  for (const auto& row_inputs : inputs) scores.push_back(sigmoid(logistic.log_odds(row_inputs)));
  const double cut = std::clamp(cut_for_share(scores, options.large_share), 0.0, 1.0);

  // Version: the weights' hash, so the same data and seed give the same version string.
  const std::string weights_text = logistic.to_json().dump();
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  const std::string version =
      std::string(stamp) + "-" + edge::xxh64_hex(weights_text).substr(0, 8);

  ComplexityTrainReport report;
  report.rows = rows.size();
  report.hard_rows = hard;
  report.train_auc = edge::auroc(scores, labels);
  report.model = std::make_shared<const ComplexityModel>(options.kind, std::move(logistic),
                                                         std::move(fasttext), normalizer_settings,
                                                         cut, options.large_share, version);
  return report;
}

Result<ComplexityTrainReport> train_complexity_directory(const std::string& data_path,
                                                         const std::filesystem::path& out_dir,
                                                         const ComplexityTrainOptions& options) {
  return train_complexity_directory(std::vector<ComplexitySource>{{data_path, 1.0}}, out_dir, options);
}

Result<ComplexityTrainReport> train_complexity_directory(const std::vector<ComplexitySource>& sources,
                                                         const std::filesystem::path& out_dir,
                                                         const ComplexityTrainOptions& options) {
  std::vector<std::size_t> per_source;
  auto rows = read_complexity_rows(sources, &per_source);
  if (!rows) return rows.error();
  auto report = train_complexity_model(*rows, options);
  if (!report) return report.error();

  const std::filesystem::path target = std::filesystem::absolute(out_dir);
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  FolderGuard staging{unique_folder(target.parent_path(), "." + target.filename().string() + ".staging")};
  std::filesystem::remove_all(staging.path, ec);
  if (!std::filesystem::create_directories(staging.path, ec)) {
    return Error{"io_error", staging.path.string() + ": cannot create: " + ec.message()};
  }
  json data = json::array();
  for (std::size_t k = 0; k < sources.size(); ++k) {
    std::string hash;
    const std::filesystem::path file(sources[k].path);
    if (auto described = edge::describe_file(file.parent_path(), file.filename().string())) hash = described->xxh64;
    data.push_back({{"path", sources[k].path}, {"xxh64", hash}, {"weight", sources[k].weight}, {"rows", per_source[k]}});
  }
  const json training = {{"data", data},
                         {"rows", report->rows},
                         {"hard_rows", report->hard_rows},
                         {"seed", options.seed},
                         {"l2", options.l2},
                         {"train_auc", report->train_auc},
                         {"fasttext", options.kind == ComplexityKind::kFeatures
                                          ? json(nullptr)
                                          : options.fasttext.to_json()}};
  if (Status s = report->model->save(staging.path, training); !s) return s.error();

  if (Status s = edge::replace_model_directory(staging.path, target); !s) return s.error();
  staging.path.clear();
  return report;
}

}  // namespace hengshi::router
