// The cache's smaller parts: the n-gram embedder and the semantic index.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cache/ngram_embedder.h"
#include "cache/semantic_index.h"

namespace hengshi::cache {
namespace {

float norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return static_cast<float>(std::sqrt(sum));
}

TEST(NgramEmbedderTest, UnitVectorsWhoseCosineFollowsSharedCharacters) {
  NgramEmbedder embedder(512);
  auto a = embedder.embed("how do i reset my password");
  auto b = embedder.embed("how can i reset my password");
  auto c = embedder.embed("what is the capital of france");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->size(), 512u);
  EXPECT_NEAR(norm(*a), 1.0f, 1e-5f);
  EXPECT_NEAR(cosine(*a, *embedder.embed("how do i reset my password")), 1.0f, 1e-5f);
  EXPECT_GT(cosine(*a, *b), 0.6f);
  EXPECT_LT(cosine(*a, *c), 0.3f);
  EXPECT_GT(cosine(*a, *b), cosine(*a, *c));
  // Chinese: characters are the n-grams.
  auto d = embedder.embed("我的快递到哪里了");
  auto e = embedder.embed("我的快递到哪了");
  EXPECT_GT(cosine(*d, *e), 0.7f);
  // Nothing to embed: a zero vector, not NaN.
  auto empty = embedder.embed("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(norm(*empty), 0.0f);
}

std::vector<float> random_unit(std::mt19937& random, int dim) {
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<std::size_t>(dim));
  for (float& x : v) x = normal(random);
  normalize_unit(v);
  return v;
}

TEST(SemanticIndexTest, FindsTheNearestLiveEntriesAndRebuildsPastItsTombstones) {
  constexpr int kDim = 32;
  SemanticIndex index(kDim, 0.25);
  std::mt19937 random(7);
  std::vector<std::vector<float>> vectors;
  for (std::uint64_t id = 0; id < 200; ++id) {
    vectors.push_back(random_unit(random, kDim));
    index.add(id, vectors.back());
  }
  std::vector<SemanticIndex::Neighbour> found;
  index.nearest(vectors[42], 3, found);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().id, 42u);
  EXPECT_NEAR(found.front().similarity, 1.0f, 1e-4f);
  EXPECT_GE(found.front().similarity, found.back().similarity);
  // Removed entries are never returned; past a quarter of tombstones the graph is rebuilt.
  index.remove(42);
  index.nearest(vectors[42], 3, found);
  for (const auto& n : found) EXPECT_NE(n.id, 42u);
  for (std::uint64_t id = 0; id < 100; ++id) index.remove(id);
  EXPECT_EQ(index.size(), 100u);
  EXPECT_GE(index.rebuilds(), 1u);
  EXPECT_LE(static_cast<double>(index.tombstones()), 0.25 * 200);
  index.nearest(vectors[150], 1, found);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found.front().id, 150u);
}

TEST(SemanticIndexTest, SimilaritiesAreTheExactDotProductsWhateverTheDimension) {
  // The index's own SSE distance (16 floats a step, then the rest one by one) against a plain
  // dot product, for dimensions below, at and past a multiple of 16.
  for (int dim : {7, 16, 37, 256}) {
    SemanticIndex index(dim, 0.25);
    std::mt19937 random(static_cast<unsigned>(dim));
    std::vector<std::vector<float>> vectors;
    for (std::uint64_t id = 0; id < 20; ++id) {
      vectors.push_back(random_unit(random, dim));
      index.add(id, vectors.back());
    }
    const std::vector<float> query = random_unit(random, dim);
    std::vector<SemanticIndex::Neighbour> found;
    index.nearest(query, 20, found);
    ASSERT_EQ(found.size(), 20u) << dim;
    for (const auto& neighbour : found) {
      double dot = 0;
      for (int i = 0; i < dim; ++i) dot += static_cast<double>(query[i]) * vectors[neighbour.id][i];
      EXPECT_NEAR(neighbour.similarity, dot, 1e-5) << "dim " << dim << " id " << neighbour.id;
    }
    for (std::size_t i = 1; i < found.size(); ++i) EXPECT_GE(found[i - 1].similarity, found[i].similarity);
  }
}

}  // namespace
}  // namespace hengshi::cache
