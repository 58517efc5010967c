// SemanticIndex: the nearest cached questions of one scope, by the cosine of their embeddings —
// an hnswlib graph (inner product over unit vectors) that grows as entries arrive. Removed
// entries are marked deleted in the graph (hnswlib keeps them as tombstones for its links) and
// the graph is rebuilt from the live vectors once tombstones pass a share of it, so memory
// follows the entries.
//
// Labels are cache entry ids. Not thread-safe: the owner (AnswerCache) locks around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_set>
#include <vector>

namespace hnswlib {
template <typename T>
class HierarchicalNSW;
}  // namespace hnswlib

namespace hengshi::cache {

class UnitVectorSpace;  // semantic_index.cc: hnswlib's inner-product space, with an SSE distance

class SemanticIndex {
 public:
  struct Neighbour {
    std::uint64_t id = 0;
    float similarity = 0;  // cosine
  };

  // `rebuild_share`: tombstones / stored points above which the graph is rebuilt.
  SemanticIndex(int dim, double rebuild_share);
  ~SemanticIndex();
  SemanticIndex(const SemanticIndex&) = delete;
  SemanticIndex& operator=(const SemanticIndex&) = delete;

  // Adds (or replaces) `id`'s unit vector of dim() floats.
  void add(std::uint64_t id, std::span<const float> vector);
  void remove(std::uint64_t id);
  // Up to k nearest live entries, most similar first.
  void nearest(std::span<const float> vector, std::size_t k, std::vector<Neighbour>& out) const;

  std::size_t size() const { return live_.size(); }
  std::size_t tombstones() const { return tombstones_; }
  std::size_t rebuilds() const { return rebuilds_; }
  // Bytes the graph holds (approximate: hnswlib's level-0 block dominates).
  std::size_t bytes() const;
  // What one more entry costs the graph, in bytes (for the cache's byte bounds).
  static std::size_t bytes_per_point(int dim);
  int dim() const { return dim_; }

 private:
  void reserve(std::size_t points);
  void rebuild();

  int dim_;
  double rebuild_share_;
  std::unique_ptr<UnitVectorSpace> space_;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph_;
  std::size_t capacity_ = 0;
  std::size_t stored_ = 0;      // points in the graph, tombstones included
  std::size_t tombstones_ = 0;
  std::size_t rebuilds_ = 0;
  std::unordered_set<std::uint64_t> live_;  // the graph holds the vectors; one copy only
};

}  // namespace hengshi::cache
