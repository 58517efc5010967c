// Embedder: text → a unit-length vector, so that the cosine of two texts' vectors says how alike
// they are. One seam for every user of sentence similarity: the cache's semantic tier
// (src/cache/), and whatever else compares questions (the out-of-scope score's neighbours).
// Implementations: cache/ngram_embedder.h (character n-grams, no model), edge's fastText
// sentence vectors (edge/intent_embedder.h) and llama.cpp embeddings from a GGUF embedding model
// (edge/llm_embedder.h).
//
// Thread-safety: embed() may be called from any number of threads at once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace hengshi {

class Embedder {
 public:
  virtual ~Embedder() = default;
  // A stable name with what decides the vectors (kind and model version): vectors from two
  // embedders with different names are never compared.
  virtual const std::string& name() const = 0;
  virtual int dim() const = 0;
  // dim() floats of unit L2 norm; all zeros for a text with nothing to embed. Errors are values
  // (a model that failed to run), never exceptions.
  virtual Result<std::vector<float>> embed(std::string_view text) const = 0;
  // Whether embed() computes for long (a neural model: milliseconds): its callers on an I/O
  // thread then run it on a thread of their own (the cache does).
  virtual bool expensive() const { return false; }
};

// The cosine of two unit vectors of the same size (their dot product).
float cosine(const std::vector<float>& a, const std::vector<float>& b);
// Scales `vector` to unit length in place; leaves a zero vector as it is.
void normalize_unit(std::vector<float>& vector);

}  // namespace hengshi
