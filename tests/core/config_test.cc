#include "core/config.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

namespace hengshi {
namespace {

TEST(ConfigTest, EmbeddedDefaultsAreValid) {
  Config config = default_config();
  EXPECT_TRUE(validate_config(config).ok());
  ASSERT_NE(config.find_pool("cloud-small"), nullptr);
  ASSERT_NE(config.find_pool("cloud-large"), nullptr);
  EXPECT_EQ(config.routing.default_pool, "cloud-small");
}

TEST(ConfigTest, EmptyFileMeansDefaults) {
  auto config = load_config_text("", "empty.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->server.listen, default_config().server.listen);
  EXPECT_EQ(config->source, "empty.yaml");
}

TEST(ConfigTest, ReadsPoolsAndServer) {
  auto config = load_config_text(R"(
server:
  listen: 127.0.0.1:0
  max_body_bytes: 2048
pools:
  cloud-small:
    balancer: least_outstanding
    members:
      - name: a
        base_url: http://127.0.0.1:1234/v1
        model: small-a
        api_key_env: SMALL_KEY
        price_input_per_1k: 0.5
        ttft_timeout_ms: 700
      - base_url: https://example.test/v1
        model: small-b
  cloud-large:
    members:
      - base_url: http://127.0.0.1:1235
        model: large
)", "t.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->server.max_body_bytes, 2048);
  const PoolConfig* small = config->find_pool("cloud-small");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->balancer, "least_outstanding");
  ASSERT_EQ(small->members.size(), 2u);
  EXPECT_EQ(small->members[0].api_key_env, "SMALL_KEY");
  EXPECT_DOUBLE_EQ(small->members[0].price_input_per_1k, 0.5);
  EXPECT_EQ(small->members[0].ttft_timeout_ms, 700);
  EXPECT_EQ(small->members[1].name, "https://example.test/v1");  // name defaults to the URL
}

struct BadCase {
  const char* yaml;
  const char* expected_fragment;
};

class ConfigRejectTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigRejectTest, NamesFileFieldAndReason) {
  auto config = load_config_text(GetParam().yaml, "bad.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("bad.yaml"), std::string::npos) << config.error().message;
  EXPECT_NE(config.error().message.find(GetParam().expected_fragment), std::string::npos)
      << config.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigRejectTest,
    ::testing::Values(
        BadCase{"server: {listen: nowhere}", "server.listen"},
        BadCase{"server: {max_body_bytes: -1}", "server.max_body_bytes: must be > 0"},
        BadCase{"server: {threads: many}", "server.threads: must be an integer"},
        BadCase{"server: {lisen: 1}", "server.lisen: unknown field"},
        BadCase{"surprise: 1", "surprise: unknown field"},
        BadCase{"pools: {cloud-small: {members: [{base_url: 'ftp://x', model: m}]}}",
                "pools.cloud-small.members[0].base_url"},
        BadCase{"pools: {cloud-small: {members: [{base_url: 'http://x'}]}}",
                "pools.cloud-small.members[0].model: is required"},
        BadCase{"pools: {cloud-small: {members: [{base_url: 'http://x', model: m, api_key: sk-1}]}}",
                "api_key_env"},
        BadCase{"pools: {cloud-medium: {members: [{base_url: 'http://x', model: m}]}}",
                "pools.cloud-medium: unknown pool"},
        BadCase{"pools: {cloud-small: {balancer: random, members: [{base_url: 'http://x', model: m}]}}",
                "balancer"},
        BadCase{"pools: {cloud-small: {members: []}}", "members: must not be empty"},
        BadCase{"pools: {cloud-large: {members: [{base_url: 'http://x', model: m}]}}",
                "routing.default_pool"},
        BadCase{"server: [1, 2", "line"}));

TEST(ConfigTest, FileThatCannotBeOpenedIsNamed) {
  auto config = load_config_file("/nonexistent/hengshi.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("/nonexistent/hengshi.yaml"), std::string::npos);
}

TEST(ConfigTest, LoadsFromFile) {
  std::string path = ::testing::TempDir() + "/hengshi_config_test.yaml";
  {
    std::ofstream out(path);
    out << "server: {listen: '127.0.0.1:9999'}\n";
  }
  auto config = load_config_file(path);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->server.listen, "127.0.0.1:9999");
  EXPECT_EQ(config->source, path);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace hengshi
