#include "core/embedder.h"

#include <cmath>
#include <numeric>

namespace hengshi {

float cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0.0f;
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0f);
}

void normalize_unit(std::vector<float>& vector) {
  double sum = 0;
  for (float v : vector) sum += static_cast<double>(v) * v;
  if (sum <= 0) return;
  const auto scale = static_cast<float>(1.0 / std::sqrt(sum));
  for (float& v : vector) v *= scale;
}

}  // namespace hengshi
