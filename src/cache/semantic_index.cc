#include "cache/semantic_index.h"

// As in edge/neighbour_index.cc: hnswlib's SSE search prefetches one neighbour id past the end of
// an upper layer's link list (an AddressSanitizer heap-buffer-overflow), so its manual
// vectorisation is off. That also turns off its SIMD distances, and a float dot product is not
// vectorised by the compiler without -ffast-math (bench/cache: semantic hit p50 455 -> 841 us),
// so the distance is our own, SSE with four accumulators: it reads only the two vectors.
#define NO_MANUAL_VECTORIZATION
#include <hnswlib/hnswlib.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>

namespace hengshi::cache {
namespace {

// hnswlib's inner-product distance, 1 - a.b, for unit vectors.
float inner_product_distance(const void* left, const void* right, const void* dim_ptr) {
  const auto* a = static_cast<const float*>(left);
  const auto* b = static_cast<const float*>(right);
  const std::size_t dim = *static_cast<const std::size_t*>(dim_ptr);
  std::size_t i = 0;
  float sum = 0.0f;
#if defined(__SSE__)
  __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps(), s2 = _mm_setzero_ps(), s3 = _mm_setzero_ps();
  for (; i + 16 <= dim; i += 16) {
    s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
    s1 = _mm_add_ps(s1, _mm_mul_ps(_mm_loadu_ps(a + i + 4), _mm_loadu_ps(b + i + 4)));
    s2 = _mm_add_ps(s2, _mm_mul_ps(_mm_loadu_ps(a + i + 8), _mm_loadu_ps(b + i + 8)));
    s3 = _mm_add_ps(s3, _mm_mul_ps(_mm_loadu_ps(a + i + 12), _mm_loadu_ps(b + i + 12)));
  }
  float lanes[4];
  _mm_storeu_ps(lanes, _mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
  sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
  for (; i < dim; ++i) sum += a[i] * b[i];
  return 1.0f - sum;
}

}  // namespace

// The inner-product space with the distance above (hnswlib's own InnerProductSpace, minus its
// build-time SIMD choice).
class UnitVectorSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit UnitVectorSpace(std::size_t dim) : dim_(dim) {}
  std::size_t get_data_size() override { return dim_ * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return inner_product_distance; }
  void* get_dist_func_param() override { return &dim_; }

 private:
  std::size_t dim_;
};

namespace {

constexpr std::size_t kM = 16;                // graph degree: hnswlib's default
constexpr std::size_t kEfConstruction = 100;  // build quality; inserts stay in the µs range
constexpr std::size_t kEfSearch = 64;
constexpr std::size_t kInitialCapacity = 16;

}  // namespace

SemanticIndex::SemanticIndex(int dim, double rebuild_share)
    : dim_(dim), rebuild_share_(rebuild_share), space_(std::make_unique<UnitVectorSpace>(static_cast<std::size_t>(dim))) {}

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
