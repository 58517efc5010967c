// `hengshi finetune` masks the prompt and the padding of a training window with label -1, which
// the pinned llama.cpp turns into an all-zero label row (scripts/llama-patches/opt-label-mask.patch).
// Such a row must add no loss and no gradient. ggml's cross-entropy backward is written for
// one-hot rows (softmax - label), so an all-zero row would push down whatever the model predicts
// at every masked position; the patch scales the softmax by the row's label sum. Checked here on
// ggml itself, against the gradient worked out by hand.
#include <gtest/gtest.h>

#ifdef HENGSHI_HAVE_LLAMA

#include <ggml-cpu.h>
#include <ggml.h>

#include <cmath>
#include <memory>
#include <vector>

namespace hengshi::edge {
namespace {

struct GgmlFree {
  void operator()(ggml_context* context) const { ggml_free(context); }
};

TEST(OptLabelMask, AnAllZeroLabelRowAddsNoLossAndNoGradient) {
  constexpr int kVocab = 5;
  constexpr int kRows = 2;  // row 0 labelled (one-hot at token 2), row 1 masked
  constexpr int kLabel = 2;
  ggml_init_params params{/*mem_size=*/16 * 1024 * 1024, /*mem_buffer=*/nullptr, /*no_alloc=*/false};
  std::unique_ptr<ggml_context, GgmlFree> context(ggml_init(params));
  ASSERT_NE(context, nullptr);
  ggml_context* ctx = context.get();

  ggml_tensor* logits = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kVocab, kRows);
  ggml_tensor* labels = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kVocab, kRows);
  auto* x = static_cast<float*>(logits->data);
  auto* y = static_cast<float*>(labels->data);
  for (int i = 0; i < kVocab * kRows; ++i) {
    x[i] = 0.3f * static_cast<float>(i % kVocab) - 0.1f * static_cast<float>(i / kVocab);
    y[i] = 0.0f;
  }
  y[kLabel] = 1.0f;
  ggml_set_param(logits);
  ggml_tensor* loss = ggml_cross_entropy_loss(ctx, logits, labels);
  ggml_set_loss(loss);

  ggml_cgraph* graph = ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, /*grads=*/true);
  ggml_build_forward_expand(graph, loss);
  ggml_build_backward_expand(ctx, graph, nullptr);
  ggml_graph_reset(graph);  // loss gradient 1, the rest 0
  ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, graph, 1), GGML_STATUS_SUCCESS);

  // By hand: loss = -log softmax(row 0)[label] / rows; d loss / d row 0 = (softmax - one-hot) / rows.
  std::vector<double> softmax(kVocab);
  double sum = 0;
  for (int i = 0; i < kVocab; ++i) sum += softmax[i] = std::exp(double(x[i]));
  for (double& p : softmax) p /= sum;
  EXPECT_NEAR(static_cast<const float*>(loss->data)[0], -std::log(softmax[kLabel]) / kRows, 1e-5);

  const ggml_tensor* grad = ggml_graph_get_grad(graph, logits);
  ASSERT_NE(grad, nullptr);
  const auto* g = static_cast<const float*>(grad->data);
  for (int i = 0; i < kVocab; ++i) {
    EXPECT_NEAR(g[i], (softmax[i] - (i == kLabel ? 1.0 : 0.0)) / kRows, 1e-6) << "labelled row, token " << i;
    EXPECT_EQ(g[kVocab + i], 0.0f) << "masked row, token " << i;
  }
}

}  // namespace
}  // namespace hengshi::edge

#endif  // HENGSHI_HAVE_LLAMA
