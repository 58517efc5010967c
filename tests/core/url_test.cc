#include "core/url.h"

#include <gtest/gtest.h>

namespace hengshi {
namespace {

TEST(UrlTest, ParsesSchemesPortsAndPaths) {
  auto a = parse_url("https://api.example.com/v1/");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->tls());
  EXPECT_EQ(a->host, "api.example.com");
  EXPECT_EQ(a->port, "443");
  EXPECT_EQ(a->path, "/v1");
  auto b = parse_url("http://127.0.0.1:9101");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, "9101");
  EXPECT_EQ(b->path, "");
  auto c = parse_url("http://[::1]:8080/x");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "8080");
}

TEST(UrlTest, RejectsBadUrls) {
  EXPECT_FALSE(parse_url("example.com").ok());
  EXPECT_FALSE(parse_url("ftp://example.com").ok());
  EXPECT_FALSE(parse_url("http://:80").ok());
  EXPECT_FALSE(parse_url("http://host:99999").ok());
  EXPECT_FALSE(parse_url("http://host:abc").ok());
}

}  // namespace
}  // namespace hengshi
