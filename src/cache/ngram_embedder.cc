#include "cache/ngram_embedder.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>

namespace hengshi::cache {
namespace {

// The byte length of the UTF-8 sequence starting with `lead` (1 for a stray continuation byte).
std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

}  // namespace

NgramEmbedder::NgramEmbedder(int dim, std::function<std::string(std::string_view)> normalize)
    : dim_(std::max(16, dim)), normalize_(std::move(normalize)), name_("ngram-" + std::to_string(dim_)) {}

Result<std::vector<float>> NgramEmbedder::embed(std::string_view text) const {
  std::string normalized;
  if (normalize_) {
    normalized = normalize_(text);
  } else {
    normalized.assign(text);
    for (char& c : normalized) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  // Code point boundaries of " text ": n-grams are runs of whole characters.
  const std::string padded = " " + normalized + " ";
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < padded.size(); i += sequence_length(static_cast<unsigned char>(padded[i]))) {
    starts.push_back(i);
  }
  starts.push_back(padded.size());
  std::vector<float> vector(static_cast<std::size_t>(dim_), 0.0f);
  const std::size_t characters = starts.size() - 1;
  for (std::size_t n = 1; n <= 3; ++n) {
    const float weight = n == 1 ? 0.5f : 1.0f;  // single characters say least about meaning
    for (std::size_t i = 0; i + n <= characters; ++i) {
      const std::string_view gram(padded.data() + starts[i], starts[i + n] - starts[i]);
      if (gram.find_first_not_of(' ') == std::string_view::npos) continue;  // padding alone
      const XXH64_hash_t hash = XXH64(gram.data(), gram.size(), n);
      const auto bucket = static_cast<std::size_t>(hash % static_cast<XXH64_hash_t>(dim_));
      vector[bucket] += (hash >> 63) != 0 ? -weight : weight;  // signed hashing: collisions cancel out
    }
  }
  normalize_unit(vector);
  return vector;
}

}  // namespace hengshi::cache
