#include "cache/semantic_index.h"

#include <hnswlib/hnswlib.h>

#include <algorithm>

namespace hengshi::cache {
namespace {

constexpr std::size_t kM = 16;                // graph degree: hnswlib's default
constexpr std::size_t kEfConstruction = 100;  // build quality; inserts stay in the µs range
constexpr std::size_t kEfSearch = 64;
constexpr std::size_t kInitialCapacity = 16;

}  // namespace

SemanticIndex::SemanticIndex(int dim, double rebuild_share)
    : dim_(dim), rebuild_share_(rebuild_share), space_(std::make_unique<hnswlib::InnerProductSpace>(dim)) {}

SemanticIndex::~SemanticIndex() = default;

void SemanticIndex::reserve(std::size_t points) {
  if (graph_ && points <= capacity_) return;
  const std::size_t capacity = std::max({kInitialCapacity, points, capacity_ * 2});
  if (!graph_) {
    graph_ = std::make_unique<hnswlib::HierarchicalNSW<float>>(space_.get(), capacity, kM, kEfConstruction, 42);
    graph_->setEf(kEfSearch);
  } else {
    graph_->resizeIndex(capacity);
  }
  capacity_ = capacity;
}

void SemanticIndex::add(std::uint64_t id, std::span<const float> vector) {
  if (static_cast<int>(vector.size()) != dim_) return;
  auto [it, inserted] = vectors_.try_emplace(id);
  it->second.assign(vector.begin(), vector.end());
  if (!inserted) {  // the same label again: hnswlib updates the point in place
    graph_->addPoint(vector.data(), static_cast<hnswlib::labeltype>(id));
    return;
  }
  reserve(stored_ + 1);
  graph_->addPoint(vector.data(), static_cast<hnswlib::labeltype>(id));
  ++stored_;
}

void SemanticIndex::remove(std::uint64_t id) {
  auto it = vectors_.find(id);
  if (it == vectors_.end()) return;
  vectors_.erase(it);
  graph_->markDelete(static_cast<hnswlib::labeltype>(id));
  ++tombstones_;
  if (static_cast<double>(tombstones_) > rebuild_share_ * static_cast<double>(stored_) && tombstones_ >= 8) {
    rebuild();
  }
}

void SemanticIndex::rebuild() {
  graph_.reset();
  capacity_ = 0;
  stored_ = 0;
  tombstones_ = 0;
  ++rebuilds_;
  if (vectors_.empty()) return;
  reserve(vectors_.size());
  for (const auto& [id, vector] : vectors_) {
    graph_->addPoint(vector.data(), static_cast<hnswlib::labeltype>(id));
    ++stored_;
  }
}

void SemanticIndex::nearest(std::span<const float> vector, std::size_t k, std::vector<Neighbour>& out) const {
  out.clear();
  if (!graph_ || vectors_.empty() || static_cast<int>(vector.size()) != dim_) return;
  auto found = graph_->searchKnn(vector.data(), std::min(k, vectors_.size()));
  while (!found.empty()) {
    const auto [distance, label] = found.top();
    found.pop();
    out.push_back({static_cast<std::uint64_t>(label), 1.0f - distance});  // inner product distance = 1 - cos
  }
  std::reverse(out.begin(), out.end());  // the queue pops the farthest first
}

std::size_t SemanticIndex::bytes() const {
  // hnswlib's level-0 block: per point, links (M0 = 2M ints + a count) + the vector + its label;
  // upper levels add about 1/M of that again. Plus our copy of each live vector.
  const std::size_t per_point = (2 * kM + 1) * sizeof(unsigned) + dim_ * sizeof(float) + sizeof(std::size_t);
  return capacity_ * per_point * (kM + 1) / kM + vectors_.size() * (dim_ * sizeof(float) + 48);
}

}  // namespace hengshi::cache
