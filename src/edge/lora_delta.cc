#include "edge/lora_delta.h"

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>
#include <cmath>

namespace hengshi::edge {

LowRankDelta low_rank_delta(std::span<const float> tuned, std::span<const float> base,
                            std::size_t rows, std::size_t cols, int rank) {
  using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto r_rows = static_cast<Eigen::Index>(rows);
  const auto r_cols = static_cast<Eigen::Index>(cols);
  Matrix delta(r_rows, r_cols);
  for (Eigen::Index i = 0; i < r_rows; ++i) {
    for (Eigen::Index j = 0; j < r_cols; ++j) {
      const auto at = static_cast<std::size_t>(i) * cols + static_cast<std::size_t>(j);
      delta(i, j) = double(tuned[at]) - double(base[at]);
    }
  }
  LowRankDelta out;
  out.rank = std::max(0, std::min<int>(rank, static_cast<int>(std::min(rows, cols))));
  out.delta_norm = delta.norm();
  const Eigen::BDCSVD<Matrix> svd(delta, Eigen::ComputeThinU | Eigen::ComputeThinV);
  const Eigen::Index r = out.rank;
  const Eigen::VectorXd root = svd.singularValues().head(r).cwiseSqrt();
  const Matrix b = svd.matrixU().leftCols(r) * root.asDiagonal();              // rows × r
  const Matrix a = root.asDiagonal() * svd.matrixV().leftCols(r).transpose();  // r × cols
  out.b.assign(b.data(), b.data() + b.size());
  out.a.assign(a.data(), a.data() + a.size());
  out.relative_error = out.delta_norm > 0 ? (delta - b * a).norm() / out.delta_norm : 0.0;
  return out;
}

}  // namespace hengshi::edge
