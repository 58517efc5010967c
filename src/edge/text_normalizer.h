// Text normalisation shared by intent training and inference: the same function must run on
// both sides, so its settings are stored in the model directory (normalizer.json) and a loaded
// model always normalises the way it was trained.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

// How CJK text is cut into fastText tokens. Latin words, numbers etc. are ICU words in both.
enum class Segmentation {
  kIcuWord,   // ICU dictionary word break for Chinese (词): 退款 申请
  kHanChars,  // every Han/kana character is its own token (字); fastText word n-grams add bigrams
};

std::string_view segmentation_name(Segmentation segmentation);

struct NormalizerSettings {
  static constexpr int kVersion = 1;

  int version = kVersion;
  // kHanChars measured better on KUAKE-QIC than kIcuWord (bench/edge_intent.cc).
  Segmentation segmentation = Segmentation::kHanChars;
  bool case_fold = true;         // NFKC_Casefold instead of plain NFKC
  bool drop_punctuation = true;  // punctuation/symbol-only tokens are not fed to the model

  nlohmann::json to_json() const;
  // Rejects unknown versions and unknown segmentation names; `source` names the file in errors.
  static Result<NormalizerSettings> from_json(const nlohmann::json& json, std::string_view source);
};

// Stateless apart from its settings; every method is const and safe to call from many threads
// at once (per-thread ICU break iterators are kept internally).
class TextNormalizer {
 public:
  explicit TextNormalizer(NormalizerSettings settings = {});

  // NFKC (with case folding unless disabled): full-width ASCII → ASCII, U+3000 → space,
  // compatibility characters (①, ㎏, ﬁ) decomposed; then every run of Unicode white space becomes
  // one ASCII space and the ends are trimmed. Invalid UTF-8 becomes U+FFFD.
  std::string normalize(std::string_view utf8) const;

  // normalize() then segmentation into tokens; punctuation-only tokens are dropped.
  std::vector<std::string> tokenize(std::string_view utf8) const;

  // The tokens joined by single spaces: one fastText input line (without the newline).
  std::string to_model_input(std::string_view utf8) const;

  const NormalizerSettings& settings() const { return settings_; }

 private:
  NormalizerSettings settings_;
};

}  // namespace hengshi::edge
