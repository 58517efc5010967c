// The low-rank delta a LoRA adapter carries: for a fine-tuned matrix W' and its base W, the
// truncated SVD of W' - W at rank r gives B (rows × r) and A (r × cols) with B·A the best rank-r
// approximation of the change (Eckart–Young). Matrices are row-major as ggml stores a weight:
// `rows` = ne1 (outputs), `cols` = ne0 (inputs). Eigen's divide-and-conquer SVD does the work.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace hengshi::edge {

struct LowRankDelta {
  int rank = 0;               // min(requested, rows, cols)
  std::vector<float> a;       // rank × cols, row-major: lora_a (ggml ne = [cols, rank])
  std::vector<float> b;       // rows × rank, row-major: lora_b (ggml ne = [rank, rows])
  double delta_norm = 0.0;    // ||W' - W||_F
  double relative_error = 0;  // ||W' - W - B·A||_F / ||W' - W||_F; 0 when the delta is 0
};

// `tuned` and `base` hold rows × cols floats. Singular values are split evenly between the
// factors (B = U·sqrt(S), A = sqrt(S)·Vᵀ), so neither factor's scale dwarfs the other's.
LowRankDelta low_rank_delta(std::span<const float> tuned, std::span<const float> base,
                            std::size_t rows, std::size_t cols, int rank);

}  // namespace hengshi::edge
