// Nearest training examples of a sentence vector (the fastText hidden vector of intent_model.h),
// for the out-of-scope score (oos_score.h): a question far from every training example, or whose
// neighbours carry other intents than the predicted one, is likely one the model never saw.
// An hnswlib graph over unit-normalised vectors (inner product = cosine), stored in the model
// directory as oos_neighbours.hnsw; the intent of each row is stored by the caller.
//
// Thread-safety: immutable after build()/load(); nearest() may be called from any number of
// threads at once (hnswlib's search takes its visited lists from a locked pool).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

class NeighbourIndex {
 public:
  struct Neighbour {
    float similarity = 0;  // cosine, [-1, 1]
    int intent = -1;       // label index of the training example
  };

  NeighbourIndex();
  ~NeighbourIndex();
  NeighbourIndex(NeighbourIndex&&) noexcept;
  NeighbourIndex& operator=(NeighbourIndex&&) noexcept;

  // `vectors` holds intents.size() rows of `dim` floats each (normalised here). Deterministic
  // for the same input order.
  static NeighbourIndex build(int dim, std::span<const float> vectors, std::vector<int> intents);
  // Reads a file written by save(); `intents` must have one entry per stored row. Errors: code
  // "model_invalid", naming the file.
  static Result<NeighbourIndex> load(const std::filesystem::path& file, int dim,
                                     std::vector<int> intents);
  Status save(const std::filesystem::path& file) const;

  // Up to k nearest rows, most similar first; none for a zero vector or an empty index.
  void nearest(std::span<const float> vector, std::size_t k, std::vector<Neighbour>& out) const;

  int dim() const { return dim_; }
  std::size_t size() const { return intents_.size(); }
  const std::vector<int>& intents() const { return intents_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int dim_ = 0;
  std::vector<int> intents_;  // by row
};

}  // namespace hengshi::edge
