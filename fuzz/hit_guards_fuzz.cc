// Fuzzes the cache's readers of caller text: the hit guards (negations, directions, numbers
// with Chinese numerals, e-mail domains) and the character n-gram embedder, on arbitrary bytes
// (broken UTF-8 included). Beyond not crashing: a text never refuses itself; the embedding is
// finite and either unit length or all zeros; splitting the input in two compares both halves.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cache/hit_guards.h"
#include "cache/ngram_embedder.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto features = hengshi::cache::guard_features(text);
  FUZZ_CHECK(!hengshi::cache::guard_rejects(features, features).has_value());
  const std::size_t half = size / 2;
  const auto left = hengshi::cache::guard_features(text.substr(0, half));
  const auto right = hengshi::cache::guard_features(text.substr(half));
  (void)hengshi::cache::guard_rejects(left, right);
  static const hengshi::cache::NgramEmbedder embedder(64);
  auto vector = embedder.embed(text);
  FUZZ_CHECK(vector.ok());
  double sum = 0;
  for (float x : *vector) {
    FUZZ_CHECK(std::isfinite(x));
    sum += static_cast<double>(x) * x;
  }
  FUZZ_CHECK(sum == 0.0 || std::fabs(sum - 1.0) < 1e-3);
  return 0;
}
