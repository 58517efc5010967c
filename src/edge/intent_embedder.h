// IntentEmbedder: the intent model's fastText sentence vectors as an Embedder (core/embedder.h):
// the mean of the question's word and n-gram rows, normalised to unit length. Free once the
// model is loaded and tuned to the deployment's own vocabulary, but trained to tell intents
// apart, not paraphrases: bench/cache measures it against the other embedders.
// Out of the model's domain its vectors mean nothing: questions in a language or on subjects it
// never saw share no word rows, so their means collapse together (bench/e2e: every out-of-scope
// Chinese question got the same cached answer at cosine > 0.8). A question the engine reads as
// likely out of scope (edge::likely_out_of_scope) therefore embeds to zeros, which the Embedder
// contract reads as "nothing to compare".
//
// Thread-safety: as IntentEngine (immutable; embed() from any thread). Borrows the engine, which
// must outlive it.
#pragma once

#include <string>

#include "core/embedder.h"
#include "edge/intent_engine.h"

namespace hengshi::edge {

class IntentEmbedder : public Embedder {
 public:
  explicit IntentEmbedder(const IntentEngine& engine)
      : engine_(engine), name_("fasttext-" + engine.model_version()) {}

  const std::string& name() const override { return name_; }
  int dim() const override { return engine_.dim(); }
  Result<std::vector<float>> embed(std::string_view text) const override {
    if (likely_out_of_scope(engine_.predict(text))) {
      return std::vector<float>(static_cast<std::size_t>(dim()), 0.0f);
    }
    std::vector<float> vector = engine_.sentence_vector(text);
    normalize_unit(vector);
    return vector;
  }

 private:
  const IntentEngine& engine_;
  std::string name_;
};

}  // namespace hengshi::edge
