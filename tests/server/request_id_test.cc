// new_request_id: "hs-<8 hex digits drawn once>-<counter>", unique per process run.
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>

#include "server/chat_completions.h"

namespace hengshi::server {
namespace {

TEST(RequestIdTest, IsThePrefixAndACounterThatCountsUp) {
  const std::string first = new_request_id();
  const std::string second = new_request_id();
  const std::regex shape("hs-([0-9a-f]{8})-([1-9][0-9]*)");
  std::smatch a;
  std::smatch b;
  ASSERT_TRUE(std::regex_match(first, a, shape)) << first;
  ASSERT_TRUE(std::regex_match(second, b, shape)) << second;
  EXPECT_EQ(a[1].str(), b[1].str());  // one prefix per process
  EXPECT_EQ(std::stoull(b[2].str()), std::stoull(a[2].str()) + 1);
}

TEST(RequestIdTest, ManyIdsAreAllDistinct) {
  std::string previous = new_request_id();
  for (int i = 0; i < 10'000; ++i) {
    const std::string next = new_request_id();
    ASSERT_NE(next, previous);
    ASSERT_EQ(next.compare(0, 12, previous, 0, 12), 0);  // "hs-" + prefix + "-" never changes
    previous = next;
  }
}

}  // namespace
}  // namespace hengshi::server
