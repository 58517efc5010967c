// The LoRA export's math: the rank-r factors of a fine-tuned matrix's change reproduce it
// exactly when the change has rank <= r, and within the best rank-r error otherwise.
#include "edge/lora_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hengshi::edge {
namespace {

// out = base + Σ_k u_k v_kᵀ · s_k for a few fixed vectors: a change of known rank.
std::vector<float> with_change(const std::vector<float>& base, std::size_t rows, std::size_t cols,
                               int rank) {
  std::vector<float> out = base;
  for (int k = 0; k < rank; ++k) {
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {
        const double u = std::sin(0.7 * double(i + 1) * (k + 1));
        const double v = std::cos(0.3 * double(j + 2) * (k + 1));
        out[i * cols + j] += static_cast<float>(u * v * (3.0 / (k + 1)));
      }
    }
  }
  return out;
}

std::vector<float> product(const LowRankDelta& d, std::size_t rows, std::size_t cols) {
  std::vector<float> out(rows * cols, 0.0f);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int k = 0; k < d.rank; ++k) sum += double(d.b[i * d.rank + k]) * d.a[k * cols + j];
      out[i * cols + j] = static_cast<float>(sum);
    }
  }
  return out;
}

TEST(LoraDeltaTest, ReproducesAChangeOfLowRankExactly) {
  const std::size_t rows = 12, cols = 9;
  std::vector<float> base(rows * cols);
  for (std::size_t i = 0; i < base.size(); ++i) base[i] = static_cast<float>(std::sin(double(i)));
  const auto tuned = with_change(base, rows, cols, 3);

  const auto delta = low_rank_delta(tuned, base, rows, cols, 4);
  EXPECT_EQ(delta.rank, 4);
  ASSERT_EQ(delta.a.size(), 4 * cols);
  ASSERT_EQ(delta.b.size(), rows * 4);
  EXPECT_LT(delta.relative_error, 1e-5);
  const auto applied = product(delta, rows, cols);
  for (std::size_t i = 0; i < base.size(); ++i) {
    EXPECT_NEAR(base[i] + applied[i], tuned[i], 1e-4) << "at " << i;
  }
}

TEST(LoraDeltaTest, LowerRankKeepsTheLargestDirections) {
  const std::size_t rows = 10, cols = 8;
  const std::vector<float> base(rows * cols, 0.5f);
  const auto tuned = with_change(base, rows, cols, 3);
  const auto one = low_rank_delta(tuned, base, rows, cols, 1);
  const auto two = low_rank_delta(tuned, base, rows, cols, 2);
  const auto three = low_rank_delta(tuned, base, rows, cols, 3);
  EXPECT_GT(one.relative_error, two.relative_error);
  EXPECT_GT(two.relative_error, three.relative_error);
  EXPECT_LT(three.relative_error, 1e-5);
  EXPECT_GT(one.relative_error, 0.01);
  // Rank is capped by the matrix; an unchanged matrix has a zero delta.
  EXPECT_EQ(low_rank_delta(tuned, base, rows, cols, 50).rank, 8);
  const auto none = low_rank_delta(base, base, rows, cols, 2);
  EXPECT_EQ(none.delta_norm, 0.0);
  EXPECT_EQ(none.relative_error, 0.0);
}

}  // namespace
}  // namespace hengshi::edge
