#include "edge/text_normalizer.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/uscript.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "edge/model_field_error.h"

namespace hengshi::edge {
namespace {

const icu::Normalizer2& nfkc_instance(bool case_fold) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* instance = case_fold ? icu::Normalizer2::getNFKCCasefoldInstance(status)
                                               : icu::Normalizer2::getNFKCInstance(status);
  // Only fails when ICU's data library is missing: a broken installation, not a request error.
  if (U_FAILURE(status) || instance == nullptr) {
    throw std::runtime_error(std::string("ICU NFKC normalizer unavailable: ") +
                             u_errorName(status));
  }
  return *instance;
}

// BreakIterator instances are not thread-safe; each thread keeps its own (they are all the same
// "zh" word instance, so sharing across normalizers is fine).
icu::BreakIterator& thread_word_breaker() {
  thread_local std::unique_ptr<icu::BreakIterator> breaker = [] {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::BreakIterator> created(
        icu::BreakIterator::createWordInstance(icu::Locale::getChinese(), status));
    if (U_FAILURE(status) || !created) {
      throw std::runtime_error(std::string("ICU word break iterator unavailable: ") +
                               u_errorName(status));
    }
    return created;
  }();
  return *breaker;
}

bool is_cjk_char(UChar32 c) {
  if (c < 0x2E80) return false;  // below CJK radicals: no Han, kana
  UErrorCode status = U_ZERO_ERROR;
  const UScriptCode script = uscript_getScript(c, &status);
  return U_SUCCESS(status) &&
         (script == USCRIPT_HAN || script == USCRIPT_HIRAGANA || script == USCRIPT_KATAKANA);
}

bool is_space_like(UChar32 c) {
  if (c < 0x80) return c <= 0x20 || c == 0x7F;  // ASCII white space and controls
  return u_isUWhiteSpace(c) || u_charType(c) == U_CONTROL_CHAR;
}

bool is_word_char(UChar32 c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const int8_t type = u_charType(c);
  return u_isalnum(c) || type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK;
}

bool has_word_content(const icu::UnicodeString& text, int32_t start, int32_t end) {
  for (int32_t i = start; i < end;) {
    const UChar32 c = text.char32At(i);
    if (is_word_char(c)) return true;
    i += U16_LENGTH(c);
  }
  return false;
}

// NFKC (+ case fold), then white-space runs → one space, trimmed. Pure ASCII input, the common
// case, skips ICU's normaliser: NFKC is the identity on ASCII and case folding is tolower.
icu::UnicodeString normalize_unicode(const NormalizerSettings& settings, std::string_view utf8) {
  const bool ascii = std::all_of(utf8.begin(), utf8.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  icu::UnicodeString folded;
  if (ascii) {
    const auto length = static_cast<int32_t>(utf8.size());
    char16_t* buffer = folded.getBuffer(length);
    for (int32_t i = 0; i < length; ++i) {
      char c = utf8[static_cast<std::size_t>(i)];
      if (settings.case_fold && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      buffer[i] = static_cast<char16_t>(c);
    }
    folded.releaseBuffer(length);
  } else {
    const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
        icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
    UErrorCode status = U_ZERO_ERROR;
    folded = nfkc_instance(settings.case_fold).normalize(input, status);
    if (U_FAILURE(status)) return {};
  }

  icu::UnicodeString collapsed;
  char16_t* out = collapsed.getBuffer(folded.length());
  int32_t written = 0;
  bool pending_space = false;
  for (int32_t i = 0; i < folded.length();) {
    const UChar32 c = folded.char32At(i);
    const int32_t units = U16_LENGTH(c);
    if (is_space_like(c)) {
      pending_space = true;
    } else {
      if (pending_space && written > 0) out[written++] = u' ';
      pending_space = false;
      for (int32_t k = 0; k < units; ++k) out[written++] = folded.charAt(i + k);
    }
    i += units;
  }
  collapsed.releaseBuffer(written);
  return collapsed;
}

// Calls emit(start, end) for each token of `text` (UTF-16 offsets), in order.
template <typename Emit>
void segment(const NormalizerSettings& settings, const icu::UnicodeString& text, Emit&& emit) {
  if (text.isEmpty()) return;
  icu::BreakIterator& breaker = thread_word_breaker();
  breaker.setText(text);
  int32_t start = breaker.first();
  for (int32_t end = breaker.next(); end != icu::BreakIterator::DONE;
       start = end, end = breaker.next()) {
    if (end - start == 1 && text.charAt(start) == u' ') continue;
    if (settings.drop_punctuation && !has_word_content(text, start, end)) continue;
    if (settings.segmentation != Segmentation::kHanChars) {
      emit(start, end);
      continue;
    }
    // Each CJK character is its own token; a non-CJK run inside the word (e.g. "b" in "b超")
    // stays one token.
    int32_t run_start = start;
    for (int32_t i = start; i < end;) {
      const UChar32 c = text.char32At(i);
      const int32_t next = i + U16_LENGTH(c);
      if (is_cjk_char(c)) {
        if (run_start < i) emit(run_start, i);
        emit(i, next);
        run_start = next;
      }
      i = next;
    }
    if (run_start < end) emit(run_start, end);
  }
}

void append_utf8(const icu::UnicodeString& text, int32_t start, int32_t end, std::string& out) {
  text.tempSubStringBetween(start, end).toUTF8String(out);
}

}  // namespace

std::string_view segmentation_name(Segmentation segmentation) {
  switch (segmentation) {
    case Segmentation::kIcuWord:
      return "icu_word";
    case Segmentation::kHanChars:
      return "han_chars";
  }
  return "unknown";
}

nlohmann::json NormalizerSettings::to_json() const {
  return {{"version", version},
          {"unicode", case_fold ? "nfkc_casefold" : "nfkc"},
          {"case_fold", case_fold},
          {"whitespace", "collapse_trim"},
          {"segmentation", std::string(segmentation_name(segmentation))},
          {"drop_punctuation", drop_punctuation}};
}

Result<NormalizerSettings> NormalizerSettings::from_json(const nlohmann::json& json,
                                                         std::string_view source) {
  const auto fail = [&](std::string_view field, std::string_view why) {
    return model_field_invalid(std::filesystem::path(source), field, why);
  };
  if (!json.is_object()) return Error{"model_invalid", std::string(source) + ": not a JSON object"};
  NormalizerSettings settings;
  if (!json.contains("version") || !json["version"].is_number_integer()) {
    return fail("version", "missing or not an integer");
  }
  settings.version = json["version"].get<int>();
  if (settings.version != kVersion) {
    return fail("version", "is " + std::to_string(settings.version) + ", this build reads " +
                               std::to_string(kVersion));
  }
  if (!json.contains("segmentation") || !json["segmentation"].is_string()) {
    return fail("segmentation", "missing or not a string");
  }
  const std::string name = json["segmentation"].get<std::string>();
  if (name == segmentation_name(Segmentation::kIcuWord)) {
    settings.segmentation = Segmentation::kIcuWord;
  } else if (name == segmentation_name(Segmentation::kHanChars)) {
    settings.segmentation = Segmentation::kHanChars;
  } else {
    return fail("segmentation", "unknown value \"" + name + "\" (icu_word | han_chars)");
  }
  for (auto [field, target] : {std::pair{"case_fold", &settings.case_fold},
                               std::pair{"drop_punctuation", &settings.drop_punctuation}}) {
    if (!json.contains(field) || !json[field].is_boolean())
      return fail(field, "missing or not a bool");
    *target = json[field].get<bool>();
  }
  return settings;
}

TextNormalizer::TextNormalizer(NormalizerSettings settings) : settings_(settings) {
  (void)nfkc_instance(settings_.case_fold);  // fail at construction, not on the first request
}

std::string TextNormalizer::normalize(std::string_view utf8) const {
  std::string out;
  normalize_unicode(settings_, utf8).toUTF8String(out);
  return out;
}

std::vector<std::string> TextNormalizer::tokenize(std::string_view utf8) const {
  const icu::UnicodeString text = normalize_unicode(settings_, utf8);
  std::vector<std::string> tokens;
  segment(settings_, text, [&](int32_t start, int32_t end) {
    append_utf8(text, start, end, tokens.emplace_back());
  });
  return tokens;
}

std::string TextNormalizer::to_model_input(std::string_view utf8) const {
  const icu::UnicodeString text = normalize_unicode(settings_, utf8);
  std::string line;
  line.reserve(utf8.size() + 16);
  segment(settings_, text, [&](int32_t start, int32_t end) {
    if (!line.empty()) line.push_back(' ');
    append_utf8(text, start, end, line);
  });
  return line;
}

}  // namespace hengshi::edge
