// Adapters folded into the base at load (LlmConfig::merge_adapters) answer as llama.cpp applying
// the same adapter at every token does: over an F32 base the two differ only by float rounding,
// so greedy answers are the same text. The adapters are random factors (make_test_adapter), large
// enough that every answer moves away from the base's.
#include "edge/llm_lora_merge.h"

#include <gtest/gtest.h>

#ifdef HENGSHI_HAVE_LLAMA

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "edge/llm_engine.h"
#include "edge/llm_test_model.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class LoraMergeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("hengshi-lora-merge-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    TestModelOptions options;
    options.f16 = false;  // exact sums: merged and runtime answers agree token for token
    auto made = make_test_model(default_vocab_dir() + "/ggml-vocab-qwen2.gguf", base(), options);
    ASSERT_TRUE(made.ok()) << made.error().message;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static std::string base() { return (*dir_ / "base.gguf").string(); }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  // The base, with `adapter` (a file; "" = none) for task type faq.
  static LlmConfig config(const std::string& adapter, float scale, bool merge) {
    LlmConfig config;
    config.model_path = base();
    config.threads = 1;
    config.context_tokens = 256;
    config.max_tokens = 12;
    config.merge_adapters = merge;
    if (!adapter.empty()) config.adapters = {{"faq", adapter, scale, "v1"}};
    return config;
  }
  static std::unique_ptr<LlmEngine> load(const std::string& adapter, float scale, bool merge) {
    auto engine = LlmEngine::load(config(adapter, scale, merge));
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    return engine.ok() ? std::move(engine).value() : nullptr;
  }

  static std::vector<std::string> answers(LlmEngine& engine, const std::string& adapter) {
    std::vector<std::string> out;
    for (const char* question : {"我的订单到哪了", "How do I reset my password?", "退款什么时候到账"}) {
      GenerationRequest request;
      request.messages = {{"user", question}};
      request.adapter = adapter;
      auto generated = engine.generate_blocking(request);
      EXPECT_TRUE(generated.ok()) << generated.error().message;
      out.push_back(generated.ok() ? generated->text : "");
    }
    return out;
  }

 private:
  static inline fs::path* dir_ = nullptr;
};

TEST_F(LoraMergeTest, AMergedAdapterAnswersAsTheRuntimeAdapterDoes) {
  // alpha 2 over rank 4 at scale 1.5: B·A enters at 0.75, so a merge that skipped alpha or
  // scale would answer otherwise.
  TestAdapterOptions options;
  options.alpha = 2.0f;
  ASSERT_TRUE(make_test_adapter(base(), path("faq.gguf"), options).ok());
  auto runtime = load(path("faq.gguf"), 1.5f, /*merge=*/false);
  auto merged = load(path("faq.gguf"), 1.5f, /*merge=*/true);
  ASSERT_TRUE(runtime && merged);

  const auto adapted = answers(*runtime, "faq");
  EXPECT_EQ(answers(*merged, "faq"), adapted);
  const auto plain = answers(*runtime, "");
  EXPECT_EQ(answers(*merged, ""), plain) << "requests without the adapter run on the base";
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NE(adapted[i], plain[i]) << "the adapter must change every answer, or this test shows nothing";
  }
  EXPECT_EQ(merged->model_label("faq"), runtime->model_label("faq"));
}

TEST_F(LoraMergeTest, ScaleZeroMergesToTheBase) {
  ASSERT_TRUE(make_test_adapter(base(), path("off.gguf")).ok());
  auto plain = load("", 1.0f, true);
  auto merged = load(path("off.gguf"), 0.0f, true);
  ASSERT_TRUE(plain && merged);
  EXPECT_EQ(answers(*merged, "faq"), answers(*plain, ""));
}

TEST_F(LoraMergeTest, OnlyTheAdaptedMatricesChange) {
  // An adapter of the attention's query matrices alone: the merge touches those and no other.
  TestAdapterOptions options;
  options.matching = "attn_q";
  ASSERT_TRUE(make_test_adapter(base(), path("q.gguf"), options).ok());
  auto report = merge_lora_adapter(base(), path("q.gguf"), 1.0f, path("q-merged.gguf"));
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->tensors, 2) << "one attn_q per layer of the two-layer test model";
  auto runtime = load(path("q.gguf"), 1.0f, false);
  auto merged = load(path("q.gguf"), 1.0f, true);
  ASSERT_TRUE(runtime && merged);
  EXPECT_EQ(answers(*merged, "faq"), answers(*runtime, "faq"));
}

TEST_F(LoraMergeTest, AMismatchedAdapterIsRefusedNamingIt) {
  TestAdapterOptions options;
  options.extra_tensor = "blk.9.attn_q.weight";
  ASSERT_TRUE(make_test_adapter(base(), path("bad.gguf"), options).ok());
  auto merged = merge_lora_adapter(base(), path("bad.gguf"), 1.0f, path("bad-merged.gguf"));
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.error().code, "lora_merge_failed");
  EXPECT_NE(merged.error().message.find("blk.9.attn_q.weight"), std::string::npos) << merged.error().message;

  for (bool merge : {true, false}) {
    auto refused = LlmEngine::load(config(path("bad.gguf"), 1.0f, merge));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, "adapter_load_failed");
    EXPECT_NE(refused.error().message.find("\"faq\""), std::string::npos) << refused.error().message;
  }

  auto unreadable = merge_lora_adapter(base(), path("missing.gguf"), 1.0f, path("x.gguf"));
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.error().message.find("missing.gguf"), std::string::npos);
}

TEST_F(LoraMergeTest, NoMergedFileIsLeftBehind) {
  ASSERT_TRUE(make_test_adapter(base(), path("kept.gguf")).ok());
  auto count = [] {
    int n = 0;
    const std::string prefix = "hengshi-merged-" + std::to_string(::getpid()) + "-";
    for (const auto& entry : fs::directory_iterator(fs::temp_directory_path())) {
      if (entry.path().filename().string().rfind(prefix, 0) == 0) ++n;
    }
    return n;
  };
  auto merged = load(path("kept.gguf"), 1.0f, true);
  ASSERT_TRUE(merged);
  EXPECT_EQ(count(), 0) << "the merged model is mapped, its file unlinked";
  EXPECT_FALSE(answers(*merged, "faq").front().empty());
}

}  // namespace
}  // namespace hengshi::edge

#else  // !HENGSHI_HAVE_LLAMA

TEST(LoraMergeTest, SkippedWithoutLlama) {
  GTEST_SKIP() << "built without llama.cpp: run scripts/fetch-llama and reconfigure";
}

#endif
