// LlmEmbedder: sentence embeddings from a GGUF embedding model (bge-small-zh, bge-m3,
// multilingual-e5, ...) through llama.cpp, as an Embedder (core/embedder.h) for the cache's
// semantic tier. The question is tokenised with the model's own tokenizer, decoded in one batch
// and pooled as the model's metadata says (<arch>.pooling_type: mean, cls, last); a model that
// names no pooling is mean-pooled, and says so in its name. The vector is scaled to unit length.
//
// This header is part of the boundary around llama.cpp: it includes no llama.cpp header.
// Thread-safety: embed() may be called from any thread; calls share one llama context and run
// one at a time. It computes for milliseconds (expensive()): never call it on an I/O thread.
#pragma once

#include <memory>
#include <string>

#include "core/embedder.h"

namespace hengshi::edge {

class LlmEmbedder : public Embedder {
 public:
  // Loads `model_path`; errors (code model_missing | model_load_failed | context_failed) name the
  // file and why.
  static Result<std::unique_ptr<LlmEmbedder>> load(const std::string& model_path, int threads = 1,
                                                   int context_tokens = 512);
  ~LlmEmbedder() override;

  const std::string& name() const override;
  int dim() const override;
  Result<std::vector<float>> embed(std::string_view text) const override;
  bool expensive() const override { return true; }
  // The pooling in use: mean | cls | last.
  std::string pooling() const;

 private:
  LlmEmbedder();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hengshi::edge
