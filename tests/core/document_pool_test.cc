// pooled_document: a released document is handed out again on its thread; one still held, or
// grown by a large body, is not.
#include "core/document_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace hengshi {
namespace {

bool parse_into(simdjson::dom::document& document, const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  return parser.parse_into_document(document, padded.data(), padded.size()).get(root) ==
         simdjson::SUCCESS;
}

TEST(DocumentPoolTest, AReleasedDocumentIsReusedAndAHeldOneIsNot) {
  if (!kDocumentPooling) GTEST_SKIP() << "no pooling under ASan";
  auto held = pooled_document();
  ASSERT_TRUE(parse_into(*held, R"({"a":1})"));
  simdjson::dom::document* released_at = nullptr;
  {
    auto released = pooled_document();
    EXPECT_NE(released.get(), held.get());  // in use: never handed out twice
    released_at = released.get();
  }
  // Every slot is tried in turn from the oldest: the released one comes back within a round.
  bool reused = false;
  std::vector<std::shared_ptr<simdjson::dom::document>> taken;
  for (std::size_t i = 0; i < kSearchedDocuments + 2 && !reused; ++i) {
    taken.push_back(pooled_document());
    EXPECT_NE(taken.back().get(), held.get());
    reused = taken.back().get() == released_at;
  }
  EXPECT_TRUE(reused);
  // The held document's contents are its own.
  EXPECT_EQ(int64_t(held->root()["a"]), 1);
}

TEST(DocumentPoolTest, ADocumentGrownByALargeBodyIsNotKept) {
  if (!kDocumentPooling) GTEST_SKIP() << "no pooling under ASan";
  std::vector<std::shared_ptr<simdjson::dom::document>> all;
  for (std::size_t i = 0; i < kPooledDocuments; ++i) all.push_back(pooled_document());
  const std::string big = "[" + std::string(kMaxPooledBytes, ' ') + "1]";
  ASSERT_TRUE(parse_into(*all[0], big));
  ASSERT_GT(all[0]->capacity(), kMaxPooledBytes);
  simdjson::dom::document* grown = all[0].get();
  all.clear();  // every document free again
  for (std::size_t i = 0; i < kPooledDocuments; ++i) {
    auto next = pooled_document();
    EXPECT_LE(next->capacity(), kMaxPooledBytes);  // the grown tape was dropped, whatever its slot
    if (next.get() == grown) {
      EXPECT_EQ(next->capacity(), 0u);  // the same address can only be a fresh document
    }
    all.push_back(std::move(next));
  }
}

TEST(DocumentPoolTest, EachThreadHasItsOwn) {
  if (!kDocumentPooling) GTEST_SKIP() << "no pooling under ASan";
  simdjson::dom::document* here = nullptr;
  {
    auto document = pooled_document();
    here = document.get();
  }
  std::shared_ptr<simdjson::dom::document> there;
  std::thread other([&there] { there = pooled_document(); });
  other.join();
  EXPECT_NE(there.get(), here);
  EXPECT_EQ(there.use_count(),
            1);  // that thread's pool went with the thread; ours still holds `here`
}

}  // namespace
}  // namespace hengshi
