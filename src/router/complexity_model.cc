#include "router/complexity_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/sigmoid.h"
#include "edge/model_field_error.h"
#include "edge/model_manifest.h"
#include "router/complexity.h"

namespace hengshi::router {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, kComplexityFeatureCount> kFeatureNames = {
    "log_tokens",      "log_sentences",   "log_questions", "reasoning_cues",
    "constraint_cues", "has_code",        "has_math",      "log_turns",
    "digit_share",     "upper_share",     "symbol_share",  "non_ascii_share",
    "log_lines",       "mean_word_bytes", "log_numbers",   "long_word_share",
    "negation_words",  "log_longest_line", "first_line_share", "log_caps_words",
};

// Math and code symbols, as a table: the byte loop is decide()'s hot path.
constexpr std::array<bool, 128> kIsSymbol = [] {
  std::array<bool, 128> table{};
  for (char c : std::string_view("=+-*/^<>()[]{}|\\_%$#&~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

// Words that turn a question around ("Which is NOT ...", "all EXCEPT"), ASCII lower case.
constexpr std::array<std::string_view, 7> kNegations = {"not",   "except",    "least", "never",
                                                        "false", "incorrect", "cannot"};
bool is_negation(std::string_view word) {
  for (std::string_view cue : kNegations) {
    if (word == cue) return true;
  }
  return false;
}

Result<json> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"model_invalid", path.string() + ": missing or unreadable"};
  std::stringstream buffer;
  buffer << in.rdbuf();
  json parsed = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Error{"model_invalid", path.string() + ": not valid JSON"};
  return parsed;
}

Status write_json_file(const std::filesystem::path& path, const json& value) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << value.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
  out.close();
  if (!out) return Error{"io_error", path.string() + ": write failed"};
  return Ok{};
}

}  // namespace

const std::array<std::string_view, kComplexityFeatureCount>& complexity_feature_names() {
  return kFeatureNames;
}

ComplexityVector complexity_vector(std::string_view text, int conversation_turns) {
  return complexity_vector(complexity_features(text, conversation_turns), text);
}

ComplexityVector complexity_vector(const ComplexityFeatures& hand, std::string_view text) {
  const int conversation_turns = hand.turns;
  // One byte pass for the character classes; multi-byte sequences count once, as non-ASCII.
  int bytes_ascii = 0, non_ascii = 0, digits = 0, upper = 0, symbols = 0, lines = 1;
  int words = 0, word_bytes = 0, long_words = 0, numbers = 0;
  int current_word = 0;
  int negations = 0, caps_words = 0, word_upper = 0;
  int line_bytes = 0, longest_line = 0, first_line = -1;
  bool in_number = false;
  bool word_all_caps = true;
  // The current word's letters, ASCII lower case, while it is short: a fixed buffer, as this loop
  // runs on every cloud-bound request.
  std::array<char, 12> lowered{};
  std::size_t lowered_size = 0;
  auto end_word = [&] {
    if (current_word > 0) {
      ++words;
      word_bytes += current_word;
      if (current_word >= 9) ++long_words;
      if (is_negation(std::string_view(lowered.data(), lowered_size))) ++negations;
      if (word_all_caps && word_upper >= 2) ++caps_words;
    }
    current_word = 0;
    word_upper = 0;
    word_all_caps = true;
    lowered_size = 0;
  };
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    ++line_bytes;
    if (c >= 0x80) {
      if ((c & 0xC0) != 0x80) ++non_ascii;  // a lead byte
      ++current_word;
      word_all_caps = false;
      in_number = false;
      continue;
    }
    ++bytes_ascii;
    const bool digit = c >= '0' && c <= '9';
    if (digit && !in_number) ++numbers;
    in_number = digit || (in_number && c == '.');
    if (digit) ++digits;
    if (c >= 'A' && c <= 'Z') ++upper;
    if (c == '\n') {
      ++lines;
      longest_line = std::max(longest_line, line_bytes - 1);
      if (first_line < 0) first_line = line_bytes - 1;
      line_bytes = 0;
    }
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      end_word();
    } else {
      ++current_word;
      // Letters only: "NOT?" and "not," are the word "not".
      const bool upper_letter = c >= 'A' && c <= 'Z';
      if (c >= 'a' && c <= 'z') word_all_caps = false;
      if (upper_letter) ++word_upper;
      if ((upper_letter || (c >= 'a' && c <= 'z')) && lowered_size < lowered.size()) {
        lowered[lowered_size++] = upper_letter ? static_cast<char>(c + 32) : static_cast<char>(c);
      }
      if (kIsSymbol[c]) ++symbols;
    }
  }
  end_word();
  longest_line = std::max(longest_line, line_bytes);
  if (first_line < 0) first_line = line_bytes;
  const double chars = std::max(1, bytes_ascii + non_ascii);
  const double total_bytes = std::max<double>(1, static_cast<double>(text.size()));
  const double word_count = std::max(1, words);
  return {std::log1p(hand.approx_tokens),
          std::log1p(hand.sentences),
          std::log1p(hand.questions),
          static_cast<double>(hand.reasoning_cues),
          static_cast<double>(hand.constraint_cues),
          hand.has_code ? 1.0 : 0.0,
          hand.has_math ? 1.0 : 0.0,
          std::log1p(std::max(0, conversation_turns)),
          digits / chars,
          upper / chars,
          symbols / chars,
          non_ascii / chars,
          std::log1p(lines),
          word_bytes / word_count,
          std::log1p(numbers),
          long_words / word_count,
          static_cast<double>(negations),
          std::log1p(longest_line),
          first_line / total_bytes,
          std::log1p(caps_words)};
}

std::string_view complexity_kind_name(ComplexityKind kind) {
  switch (kind) {
    case ComplexityKind::kFeatures: return "features";
    case ComplexityKind::kFastText: return "fasttext";
    case ComplexityKind::kCombined: return "combined";
  }
  return "features";
}

Result<ComplexityKind> complexity_kind_from_name(std::string_view name) {
  for (ComplexityKind kind :
       {ComplexityKind::kFeatures, ComplexityKind::kFastText, ComplexityKind::kCombined}) {
    if (complexity_kind_name(kind) == name) return kind;
  }
  return Error{"invalid_argument",
               "kind \"" + std::string(name) + "\": expected features, fasttext or combined"};
}

double LogisticWeights::standardised(std::size_t j, double x) const {
  const double z = (x - mean[j]) / scale[j];
  return clip > 0 ? std::clamp(z, -clip, clip) : z;
}

double LogisticWeights::log_odds(std::span<const double> inputs) const {
  double sum = bias;
  for (std::size_t i = 0; i < weights.size() && i < inputs.size(); ++i) {
    sum += weights[i] * standardised(i, inputs[i]);
  }
  return sum;
}

json LogisticWeights::to_json() const {
  json out = {{"mean", mean}, {"scale", scale}, {"weights", weights}, {"bias", bias}};
  if (clip > 0) out["clip"] = clip;
  return out;
}

Result<LogisticWeights> LogisticWeights::from_json(const json& value, std::size_t inputs,
                                                   std::string_view source) {
  const std::filesystem::path file(source);
  if (!value.is_object()) return Error{"model_invalid", file.string() + ": not a JSON object"};
  LogisticWeights weights;
  for (auto [field, out] : {std::pair<const char*, std::vector<double>*>{"mean", &weights.mean},
                            {"scale", &weights.scale},
                            {"weights", &weights.weights}}) {
    const auto it = value.find(field);
    if (it == value.end() || !it->is_array() || it->size() != inputs) {
      return edge::model_field_invalid(file, field,
                                       "missing or not " + std::to_string(inputs) + " numbers");
    }
    for (const json& number : *it) {
      if (!number.is_number() || !std::isfinite(number.get<double>())) {
        return edge::model_field_invalid(file, field, "holds a value that is not a finite number");
      }
      out->push_back(number.get<double>());
    }
  }
  for (double scale : weights.scale) {
    if (!(scale > 0)) return edge::model_field_invalid(file, "scale", "every scale must be > 0");
  }
  const auto bias = value.find("bias");
  if (bias == value.end() || !bias->is_number() || !std::isfinite(bias->get<double>())) {
    return edge::model_field_invalid(file, "bias", "missing or not a finite number");
  }
  weights.bias = bias->get<double>();
  if (const auto clip = value.find("clip"); clip != value.end()) {
    if (!clip->is_number() || !(clip->get<double>() > 0) || !std::isfinite(clip->get<double>())) {
      return edge::model_field_invalid(file, "clip", "not a finite number > 0");
    }
    weights.clip = clip->get<double>();
  }
  return weights;
}

ComplexityModel::ComplexityModel(ComplexityKind kind, LogisticWeights logistic,
                                 std::unique_ptr<edge::IntentModel> fasttext,
                                 edge::NormalizerSettings normalizer, double cut,
                                 double large_share, std::string version)
    : kind_(kind),
      logistic_(std::move(logistic)),
      fasttext_(std::move(fasttext)),
      normalizer_(normalizer),
      cut_(cut),
      large_share_(large_share),
      version_(std::move(version)) {
  if (fasttext_) {
    const auto& labels = fasttext_->labels();
    const auto hard = std::find(labels.begin(), labels.end(), "hard");
    hard_label_ = hard == labels.end() ? 0 : static_cast<std::size_t>(hard - labels.begin());
  }
}

ComplexityModel::~ComplexityModel() = default;

double ComplexityModel::fasttext_log_odds(std::string_view text) const {
  if (!fasttext_ || fasttext_->labels().size() != 2) return 0;
  thread_local std::vector<double> logits;
  fasttext_->logits(normalizer_.to_model_input(text), logits);
  return logits[hard_label_] - logits[1 - hard_label_];
}

double ComplexityModel::score(std::string_view text, int conversation_turns) const {
  return score(complexity_features(text, conversation_turns), text);
}

double ComplexityModel::score(const ComplexityFeatures& hand, std::string_view text) const {
  // Fixed-size scratch: no allocation on the request path.
  std::array<double, kComplexityFeatureCount + 1> inputs{};
  std::size_t count = 0;
  if (kind_ != ComplexityKind::kFastText) {
    const ComplexityVector features = complexity_vector(hand, text);
    std::copy(features.begin(), features.end(), inputs.begin());
    count = features.size();
  }
  if (kind_ != ComplexityKind::kFeatures) inputs[count++] = fasttext_log_odds(text);
  return sigmoid(logistic_.log_odds(std::span<const double>(inputs.data(), count)));
}

Status ComplexityModel::save(const std::filesystem::path& dir, const json& training) const {
  json weights = logistic_.to_json();
  json names = json::array();
  if (kind_ != ComplexityKind::kFastText) {
    for (std::string_view name : kFeatureNames) names.push_back(name);
  }
  if (kind_ != ComplexityKind::kFeatures) names.push_back("fasttext_log_odds");
  weights["inputs"] = names;
  if (Status s = write_json_file(dir / "weights.json", weights); !s) return s;
  std::vector<std::string> files = {"weights.json"};
  if (kind_ != ComplexityKind::kFeatures) {
    if (!fasttext_) return Error{"invalid_argument", "a fastText kind without a fastText model"};
    if (Status s = fasttext_->save(dir / "model.bin"); !s) return s;
    if (Status s = write_json_file(dir / "normalizer.json", normalizer_.settings().to_json()); !s)
      return s;
    files.push_back("model.bin");
    files.push_back("normalizer.json");
  }
  json file_rows = json::array();
  for (const std::string& name : files) {
    auto described = edge::describe_file(dir, name);
    if (!described) return described.error();
    file_rows.push_back(
        {{"name", described->name}, {"bytes", described->bytes}, {"xxh64", described->xxh64}});
  }
  const std::time_t now = std::time(nullptr);
  char created[32];
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const json manifest = {{"format", kComplexityModelFormat},
                         {"format_version", kComplexityModelFormatVersion},
                         {"model_version", version_},
                         {"created_at", created},
                         {"kind", complexity_kind_name(kind_)},
                         {"cut", {{"score", cut_}, {"large_share", large_share_}}},
                         {"files", file_rows},
                         {"training", training}};
  return write_json_file(dir / edge::kManifestFileName, manifest);
}

Result<std::shared_ptr<const ComplexityModel>> ComplexityModel::load(
    const std::filesystem::path& dir) {
  const std::filesystem::path manifest_path = dir / edge::kManifestFileName;
  auto manifest = read_json_file(manifest_path);
  if (!manifest) return manifest.error();
  const json& m = *manifest;
  if (!m.is_object()) return Error{"model_invalid", manifest_path.string() + ": not an object"};
  const auto text = [&](const char* field) -> const std::string* {
    const auto it = m.find(field);
    return it != m.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
  };
  if (!text("format") || *text("format") != kComplexityModelFormat) {
    return edge::model_field_invalid(manifest_path, "format",
                                     "expected \"" + std::string(kComplexityModelFormat) + "\"");
  }
  const auto version = m.find("format_version");
  if (version == m.end() || !version->is_number_integer() ||
      version->get<int>() != kComplexityModelFormatVersion) {
    return edge::model_field_invalid(
        manifest_path, "format_version",
        "this build reads version " + std::to_string(kComplexityModelFormatVersion));
  }
  if (!text("model_version") || text("model_version")->empty()) {
    return edge::model_field_invalid(manifest_path, "model_version", "missing or empty");
  }
  if (!text("kind")) return edge::model_field_invalid(manifest_path, "kind", "missing");
  auto kind = complexity_kind_from_name(*text("kind"));
  if (!kind) return edge::model_field_invalid(manifest_path, "kind", kind.error().message);
  const auto cut = m.find("cut");
  if (cut == m.end() || !cut->is_object() || !cut->contains("score") ||
      !(*cut)["score"].is_number() || !cut->contains("large_share") ||
      !(*cut)["large_share"].is_number()) {
    return edge::model_field_invalid(manifest_path, "cut", "missing {score, large_share}");
  }
  const double cut_score = (*cut)["score"].get<double>();
  const double large_share = (*cut)["large_share"].get<double>();
  if (!(cut_score >= 0 && cut_score <= 1) || !(large_share >= 0 && large_share <= 1)) {
    return edge::model_field_invalid(manifest_path, "cut",
                                     "score and large_share must be within [0, 1]");
  }
  // Every listed file exists with the listed size and hash.
  const auto files = m.find("files");
  if (files == m.end() || !files->is_array())
    return edge::model_field_invalid(manifest_path, "files", "missing");
  std::vector<std::string> listed;
  for (const json& row : *files) {
    if (!row.is_object() || !row.contains("name") || !row["name"].is_string() ||
        !row.contains("bytes") || !row.contains("xxh64")) {
      return edge::model_field_invalid(manifest_path, "files",
                                       "a row without name, bytes and xxh64");
    }
    const std::string name = row["name"].get<std::string>();
    if (name.empty() || name.find_first_of("/\\") != std::string::npos || name == "..") {
      return edge::model_field_invalid(manifest_path, "files",
                                       "\"" + name + "\" is not a plain file name");
    }
    auto actual = edge::describe_file(dir, name);
    if (!actual) return actual.error();
    if (row["bytes"] != actual->bytes || row["xxh64"] != actual->xxh64) {
      return edge::model_field_invalid(
          manifest_path, "files", "\"" + name + "\" differs from the manifest (size or xxh64)");
    }
    listed.push_back(name);
  }
  const auto is_listed = [&](std::string_view name) {
    return std::find(listed.begin(), listed.end(), name) != listed.end();
  };
  const bool uses_fasttext = *kind != ComplexityKind::kFeatures;
  for (std::string_view name : {"weights.json", "model.bin", "normalizer.json"}) {
    if (name != "weights.json" && !uses_fasttext) continue;
    if (!is_listed(name)) {
      return edge::model_field_invalid(manifest_path, "files",
                                       "does not list " + std::string(name));
    }
  }

  const std::filesystem::path weights_path = dir / "weights.json";
  auto weights_json = read_json_file(weights_path);
  if (!weights_json) return weights_json.error();
  const std::size_t inputs = (*kind == ComplexityKind::kFastText ? 0 : kComplexityFeatureCount) +
                             (uses_fasttext ? 1 : 0);
  if (*kind != ComplexityKind::kFastText) {
    // The stored names must be this build's features, in order: a model trained on other
    // features would silently score garbage.
    const auto names = weights_json->find("inputs");
    if (names == weights_json->end() || !names->is_array() || names->size() != inputs) {
      return edge::model_field_invalid(weights_path, "inputs",
                                       "missing or not this build's feature list");
    }
    for (std::size_t i = 0; i < kComplexityFeatureCount; ++i) {
      if ((*names)[i] != kFeatureNames[i]) {
        return edge::model_field_invalid(
            weights_path, "inputs",
            "feature " + std::to_string(i) + " is not " + std::string(kFeatureNames[i]));
      }
    }
  }
  auto logistic = LogisticWeights::from_json(*weights_json, inputs, weights_path.string());
  if (!logistic) return logistic.error();

  std::unique_ptr<edge::IntentModel> fasttext;
  edge::NormalizerSettings normalizer;
  if (uses_fasttext) {
    auto loaded = edge::IntentModel::load(dir / "model.bin");
    if (!loaded) return loaded.error();
    fasttext = std::move(*loaded);
    const auto& labels = fasttext->labels();
    if (labels.size() != 2 || std::find(labels.begin(), labels.end(), "hard") == labels.end()) {
      return edge::model_field_invalid(dir / "model.bin", "labels",
                                       "expected exactly the labels hard and easy");
    }
    auto settings_json = read_json_file(dir / "normalizer.json");
    if (!settings_json) return settings_json.error();
    auto settings = edge::NormalizerSettings::from_json(*settings_json,
                                                        (dir / "normalizer.json").string());
    if (!settings) return settings.error();
    normalizer = *settings;
  }
  return std::shared_ptr<const ComplexityModel>(
      new ComplexityModel(*kind, std::move(*logistic), std::move(fasttext), normalizer, cut_score,
                          large_share, *text("model_version")));
}

}  // namespace hengshi::router
