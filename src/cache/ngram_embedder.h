// NgramEmbedder: the default Embedder, needing no model. Character 1-, 2- and 3-grams of the
// normalised text (padded with a space at each end, so word edges count), feature-hashed with
// xxh64 into `dim` signed buckets and scaled to unit length. Good at near-duplicates and
// rephrasings that keep most characters (the LCQMC kind); weak where paraphrases share few
// characters (ATEC/BQ) — bench/cache measures both, and a GGUF embedding model
// (edge/llm_embedder.h) is the remedy there.
//
// Thread-safety: immutable; embed() may run on any number of threads at once.
#pragma once

#include <functional>
#include <string>

#include "core/embedder.h"

namespace hengshi::cache {

class NgramEmbedder : public Embedder {
 public:
  // `normalize`: the text form compared (the edge's NFKC + case + width + punctuation folding);
  // null = ASCII lower-casing only.
  explicit NgramEmbedder(int dim = 1024, std::function<std::string(std::string_view)> normalize = {});

  const std::string& name() const override { return name_; }
  int dim() const override { return dim_; }
  Result<std::vector<float>> embed(std::string_view text) const override;

 private:
  int dim_;
  std::function<std::string(std::string_view)> normalize_;
  std::string name_;
};

}  // namespace hengshi::cache
