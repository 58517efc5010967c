// Numeric kernels of the edge LLM's sampler. They run over the whole vocabulary (about 150k
// logits for Qwen models) once per generated token, so they are written with vector types and
// built once for SSE2 and once for AVX2+FMA, chosen at run time; no llama.cpp header is needed.
#pragma once

namespace hengshi::edge {

struct LogitStats {
  float max_logit = 0.0f;    // largest logit (NaN is ignored)
  int argmax = 0;            // first index holding it
  double log_sum_exp = 0.0;  // log Σ exp(logit - max_logit), so log p(i) = l_i - max - this
};

// Statistics of `count` logits. NaN is never chosen; with nothing above -inf, max_logit is -inf
// and argmax 0.
LogitStats logit_stats(const float* logits, int count);

// exp(x) for x <= 0, relative error below 1e-6; arguments below -87 give about 1.6e-38, NaN too.
float exp_nonpositive(float x);

}  // namespace hengshi::edge
