// llama.cpp sentence embeddings on a generated GGUF (random weights, the real Qwen2 tokenizer):
// the real load → tokenize → decode → pool path of the cache's llama embedder.
#include "edge/llm_embedder.h"

#include <gtest/gtest.h>

#ifdef HENGSHI_HAVE_LLAMA

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "edge/llm_test_model.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class LlmEmbedderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("hengshi-embedder-test-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    const std::string vocab = (fs::path(default_vocab_dir()) / "ggml-vocab-qwen2.gguf").string();
    TestModelOptions pooled;
    pooled.pooling = 2;  // cls: as a bge conversion says
    ASSERT_TRUE(make_test_model(vocab, (*dir_ / "pooled.gguf").string(), pooled).ok());
    ASSERT_TRUE(make_test_model(vocab, (*dir_ / "unpooled.gguf").string()).ok());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static std::string path(const char* name) { return (*dir_ / name).string(); }
  inline static fs::path* dir_ = nullptr;
};

double norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

TEST_F(LlmEmbedderTest, EmbedsWithThePoolingTheModelNames) {
  auto embedder = LlmEmbedder::load(path("pooled.gguf"));
  ASSERT_TRUE(embedder.ok()) << embedder.error().message;
  EXPECT_EQ((*embedder)->pooling(), "cls");
  EXPECT_EQ((*embedder)->dim(), TestModelOptions{}.embedding);
  auto a = (*embedder)->embed("我的快递到哪了");
  auto again = (*embedder)->embed("我的快递到哪了");
  auto other = (*embedder)->embed("how do I reset my password");
  ASSERT_TRUE(a.ok() && again.ok() && other.ok()) << (a.ok() ? "" : a.error().message);
  EXPECT_NEAR(norm(*a), 1.0, 1e-4);
  EXPECT_NEAR(cosine(*a, *again), 1.0f, 1e-4f) << "the same text, the same vector";
  EXPECT_LT(cosine(*a, *other), 0.9999f) << "another text, another vector";
}

TEST_F(LlmEmbedderTest, AModelWithoutPoolingIsMeanPooledAndSaysSo) {
  auto embedder = LlmEmbedder::load(path("unpooled.gguf"));
  ASSERT_TRUE(embedder.ok()) << embedder.error().message;
  EXPECT_EQ((*embedder)->pooling().rfind("mean", 0), 0u) << (*embedder)->pooling();
  auto vector = (*embedder)->embed("hello");
  ASSERT_TRUE(vector.ok());
  EXPECT_NEAR(norm(*vector), 1.0, 1e-4);
}

TEST_F(LlmEmbedderTest, SaysItIsExpensiveSoItRunsOffTheIoThreads) {
  auto embedder = LlmEmbedder::load(path("pooled.gguf"));
  ASSERT_TRUE(embedder.ok());
  EXPECT_TRUE((*embedder)->expensive());
}

TEST_F(LlmEmbedderTest, AMissingOrBrokenFileIsRefusedNamingIt) {
  auto missing = LlmEmbedder::load(path("nope.gguf"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "model_missing");
  EXPECT_NE(missing.error().message.find("nope.gguf"), std::string::npos);
  std::ofstream(path("broken.gguf")) << "not a gguf";
  auto broken = LlmEmbedder::load(path("broken.gguf"));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code, "model_load_failed");
}

}  // namespace
}  // namespace hengshi::edge

#endif  // HENGSHI_HAVE_LLAMA
