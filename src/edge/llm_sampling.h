// Numeric kernels of the edge LLM's sampler. They run over the whole vocabulary (about 150k
// logits for Qwen models) once per generated token, so they are written to vectorise and built
// with -O3 plus an AVX2 clone (src/edge/CMakeLists.txt); llama.cpp headers are not needed.
#pragma once

namespace hengshi::edge {

struct LogitStats {
  float max_logit = 0.0f;    // largest finite logit (NaN is ignored)
  int argmax = 0;            // first index holding it
  double log_sum_exp = 0.0;  // log Σ exp(logit - max_logit), so log p(i) = l_i - max - this
};

// Statistics of `count` logits. With no finite logit, max_logit is -inf and argmax 0.
LogitStats logit_stats(const float* logits, int count);

// exp(x) for x <= 0, relative error below 1e-6; arguments below -87 give about 1.6e-38, NaN too.
float exp_nonpositive(float x);

}  // namespace hengshi::edge
