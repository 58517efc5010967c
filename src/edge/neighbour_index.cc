#include "edge/neighbour_index.h"

// hnswlib's SSE search prefetches one neighbour id past the end of an upper layer's link list,
// a real 4-byte read outside the allocation (AddressSanitizer: heap-buffer-overflow in
// searchBaseLayer). The plain loops read only what they use; the compiler still vectorises the
// distance at -O2, and predict stays within its budget (bench_edge_intent).
#define NO_MANUAL_VECTORIZATION
#include <hnswlib/hnswlib.h>

#include <cmath>
#include <exception>

namespace hengshi::edge {
namespace {

// Graph degree and search breadth: at a few thousand rows of 64 floats these find the true
// nearest neighbour almost always, in tens of microseconds (bench/edge_intent.cc).
constexpr std::size_t kGraphDegree = 16;
constexpr std::size_t kBuildBreadth = 100;
constexpr std::size_t kSearchBreadth = 40;
constexpr std::size_t kRandomSeed = 100;

// Unit-normalised copy into `out`; false for a zero vector.
bool normalised(std::span<const float> vector, std::vector<float>& out) {
  double norm = 0;
  for (float x : vector) norm += static_cast<double>(x) * x;
  if (norm <= 0) return false;
  const auto inverse = static_cast<float>(1.0 / std::sqrt(norm));
  out.resize(vector.size());
  for (std::size_t j = 0; j < vector.size(); ++j) out[j] = vector[j] * inverse;
  return true;
}

}  // namespace

struct NeighbourIndex::Impl {
  explicit Impl(int dim) : space(static_cast<std::size_t>(dim)) {}
  hnswlib::InnerProductSpace space;  // must outlive `graph`
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
};

NeighbourIndex::NeighbourIndex() = default;
NeighbourIndex::~NeighbourIndex() = default;
NeighbourIndex::NeighbourIndex(NeighbourIndex&&) noexcept = default;
NeighbourIndex& NeighbourIndex::operator=(NeighbourIndex&&) noexcept = default;

NeighbourIndex NeighbourIndex::build(int dim, std::span<const float> vectors,
                                     std::vector<int> intents) {
  NeighbourIndex index;
  index.dim_ = dim;
  index.impl_ = std::make_unique<Impl>(dim);
  index.impl_->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(
      &index.impl_->space, std::max<std::size_t>(intents.size(), 1), kGraphDegree, kBuildBreadth,
      kRandomSeed);
  std::vector<float> unit;
  const auto width = static_cast<std::size_t>(dim);
  std::vector<int> kept;
  for (std::size_t row = 0; row < intents.size(); ++row) {
    if (!normalised(vectors.subspan(row * width, width), unit)) continue;  // no tokens known
    index.impl_->graph->addPoint(unit.data(), kept.size());
    kept.push_back(intents[row]);
  }
  index.impl_->graph->setEf(kSearchBreadth);
  index.intents_ = std::move(kept);
  return index;
}

Result<NeighbourIndex> NeighbourIndex::load(const std::filesystem::path& file, int dim,
                                            std::vector<int> intents) {
  NeighbourIndex index;
  index.dim_ = dim;
  index.impl_ = std::make_unique<Impl>(dim);
  try {
    index.impl_->graph =
        std::make_unique<hnswlib::HierarchicalNSW<float>>(&index.impl_->space, file.string());
  } catch (const std::exception& e) {
    return Error{"model_invalid", file.string() + ": cannot load neighbour index: " + e.what()};
  }
  if (index.impl_->graph->cur_element_count != intents.size()) {
    return Error{"model_invalid", file.string() + ": holds " +
                                      std::to_string(index.impl_->graph->cur_element_count) +
                                      " rows, the score file lists " +
                                      std::to_string(intents.size())};
  }
  index.impl_->graph->setEf(kSearchBreadth);
  index.intents_ = std::move(intents);
  return index;
}

Status NeighbourIndex::save(const std::filesystem::path& file) const {
  try {
    impl_->graph->saveIndex(file.string());
  } catch (const std::exception& e) {
    return Error{"io_error", file.string() + ": cannot write neighbour index: " + e.what()};
  }
  return Ok{};
}

void NeighbourIndex::nearest(std::span<const float> vector, std::size_t k,
                             std::vector<Neighbour>& out) const {
  out.clear();
  thread_local std::vector<float> unit;
  if (!impl_ || intents_.empty() || !normalised(vector, unit)) return;
  auto found = impl_->graph->searchKnn(unit.data(), std::min(k, intents_.size()));
  out.resize(found.size());
  // The queue pops the farthest first (distance = 1 − cosine).
  for (std::size_t i = out.size(); i-- > 0;) {
    const auto& [distance, row] = found.top();
    out[i] = Neighbour{1.0f - distance, intents_[static_cast<std::size_t>(row)]};
    found.pop();
  }
}

}  // namespace hengshi::edge
