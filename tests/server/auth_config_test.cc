// server.auth / keys_file / admin_* validation (src/core/config.cc): who may reach the gateway
// decides whether keys and an admin token are required.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config.h"

namespace hengshi {
namespace {

using ::testing::HasSubstr;

Status check(const std::string& yaml) {
  auto config = load_config_text(yaml, "gw.yaml");
  if (!config) return config.error();
  return Ok{};
}

TEST(AuthConfigTest, LoopbackDetection) {
  EXPECT_TRUE(is_loopback_listen("127.0.0.1:8080"));
  EXPECT_TRUE(is_loopback_listen("127.1.2.3:0"));
  EXPECT_TRUE(is_loopback_listen("[::1]:8080"));
  EXPECT_TRUE(is_loopback_listen("localhost:8080"));
  EXPECT_FALSE(is_loopback_listen("0.0.0.0:8080"));
  EXPECT_FALSE(is_loopback_listen("[::]:8080"));
  EXPECT_FALSE(is_loopback_listen("10.0.0.5:8080"));
  EXPECT_FALSE(is_loopback_listen("127.example.com:8080"));
}

TEST(AuthConfigTest, DefaultsAreLoopbackWithoutKeys) {
  Config config = default_config();
  EXPECT_EQ(config.server.auth, "auto");
  EXPECT_FALSE(config.server.auth_enabled());
  EXPECT_EQ(config.server.admin_listen, "127.0.0.1:8081");
  EXPECT_TRUE(validate_config(config).ok());
}

TEST(AuthConfigTest, AutoTurnsOnWithAKeysFile) {
  auto config = load_config_text("server: {keys_file: keys.yaml}\n", "gw.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_TRUE(config->server.auth_enabled());
}

TEST(AuthConfigTest, NonLoopbackListenerNeedsKeys) {
  auto refused = check("server: {listen: \"0.0.0.0:8080\"}\n");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("gw.yaml: server.keys_file: "));
  EXPECT_TRUE(check("server: {listen: \"0.0.0.0:8080\", keys_file: k.yaml}\n").ok());
  auto off = check("server: {listen: \"0.0.0.0:8080\", auth: \"off\", keys_file: k.yaml}\n");
  ASSERT_FALSE(off.ok());
  EXPECT_THAT(off.error().message,
              HasSubstr("gw.yaml: server.auth: off is allowed only on a loopback"));
  EXPECT_TRUE(check("server: {auth: \"off\"}\n").ok());
}

TEST(AuthConfigTest, BadValuesNameTheField) {
  auto bad = check("server: {auth: maybe}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("server.auth: must be auto, on or off"));
  auto on = check("server: {auth: \"on\"}\n");
  ASSERT_FALSE(on.ok());
  EXPECT_THAT(on.error().message, HasSubstr("server.keys_file: is required"));
  auto admin = check("server: {admin_listen: \"0.0.0.0:9000\"}\n");
  ASSERT_FALSE(admin.ok());
  EXPECT_THAT(admin.error().message, HasSubstr("server.admin_token_env"));
  EXPECT_TRUE(
      check("server: {admin_listen: \"0.0.0.0:9000\", admin_token_env: ADMIN_TOKEN}\n").ok());
  EXPECT_TRUE(check("server: {admin_listen: \"\"}\n").ok());
  auto malformed = check("server: {admin_listen: nowhere}\n");
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(malformed.error().message, HasSubstr("server.admin_listen"));
  auto hosts = check("server: {admin_allowed_hosts: 3}\n");
  ASSERT_FALSE(hosts.ok());
  EXPECT_THAT(hosts.error().message, HasSubstr("server.admin_allowed_hosts"));
}

}  // namespace
}  // namespace hengshi
