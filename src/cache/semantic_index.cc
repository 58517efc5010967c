#include "cache/semantic_index.h"

// As in edge/neighbour_index.cc: hnswlib's SSE search prefetches one neighbour id past the end of
// an upper layer's link list (an AddressSanitizer heap-buffer-overflow); the plain loops read
// only what they use, and the compiler still vectorises the distance at -O2.
#define NO_MANUAL_VECTORIZATION
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
  const bool inserted = live_.insert(id).second;
  if (!inserted) {  // the same label again: hnswlib updates the point in place
    graph_->addPoint(vector.data(), static_cast<hnswlib::labeltype>(id));
    return;
  }
  reserve(stored_ + 1);
  graph_->addPoint(vector.data(), static_cast<hnswlib::labeltype>(id));
  ++stored_;
}

void SemanticIndex::remove(std::uint64_t id) {
  if (live_.erase(id) == 0) return;
  graph_->markDelete(static_cast<hnswlib::labeltype>(id));
  ++tombstones_;
  if (static_cast<double>(tombstones_) > rebuild_share_ * static_cast<double>(stored_) && tombstones_ >= 8) {
    rebuild();
  }
}

void SemanticIndex::rebuild() {
  // The live points move to a fresh graph, read back from the old one (no second copy is kept).
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> old = std::move(graph_);
  capacity_ = 0;
  stored_ = 0;
  tombstones_ = 0;
  ++rebuilds_;
  if (live_.empty()) return;
  reserve(live_.size());
  for (std::uint64_t id : live_) {
    const std::vector<float> vector = old->getDataByLabel<float>(static_cast<hnswlib::labeltype>(id));
    graph_->addPoint(vector.data(), static_cast<hnswlib::labeltype>(id));
    ++stored_;
  }
}

void SemanticIndex::nearest(std::span<const float> vector, std::size_t k, std::vector<Neighbour>& out) const {
  out.clear();
  if (!graph_ || live_.empty() || static_cast<int>(vector.size()) != dim_) return;
  auto found = graph_->searchKnn(vector.data(), std::min(k, live_.size()));
  while (!found.empty()) {
    const auto [distance, label] = found.top();
    found.pop();
    out.push_back({static_cast<std::uint64_t>(label), 1.0f - distance});  // inner product distance = 1 - cos
  }
  std::reverse(out.begin(), out.end());  // the queue pops the farthest first
}

std::size_t SemanticIndex::bytes_per_point(int dim) {
  // hnswlib's level-0 block: links (M0 = 2M ints + a count), the vector, the label; upper levels
  // add about 1/M of that; the label lookup map and our live set about 80 bytes more.
  const std::size_t level0 = (2 * kM + 1) * sizeof(unsigned) + static_cast<std::size_t>(dim) * sizeof(float) + 8;
  return level0 * (kM + 1) / kM + 80;
}

std::size_t SemanticIndex::bytes() const { return capacity_ * bytes_per_point(dim_); }

}  // namespace hengshi::cache
