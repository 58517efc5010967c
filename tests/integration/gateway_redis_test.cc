// Two real gateways sharing one real redis-server (started here on a free loopback port), with
// one hengshi-sim as the cloud: an answer cached by one is a hit on the other, an invalidation
// on one reaches both, a key's rpm holds across both, and killing Redis fails no request.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/child_process.h"
#include "support/http_client.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace hengshi::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kSecret = "sk-fleet-test-key";       // no limits
constexpr const char* kLimited = "sk-fleet-limited-key";  // rpm 4 across the fleet

class GatewayRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<RedisServer>();
    sim_ = std::make_unique<ChildProcess>(ChildProcess::start(
        {binary_path("tools/sim/hengshi-sim"), "--listen", "127.0.0.1:0", "--name", "fleet-sim", "--seed", "3"}));
    keys_path_ = temp_path("keys.yaml");
    std::ofstream(keys_path_) << "keys:\n  - {name: fleet, sha256: " << hash_key(kSecret) << "}\n"
                              << "  - {name: limited, sha256: " << hash_key(kLimited) << ", rpm: 4}\n";
    for (auto* gateway : {&a_, &b_}) *gateway = start_gateway();
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    for (const std::string& path : files_) std::remove(path.c_str());
    std::remove(keys_path_.c_str());
  }

  static std::string hash_key(const std::string& secret) {
    const std::string input = temp_path("key.txt");
    std::ofstream(input) << secret;
    auto hashed = ChildProcess::run({binary_path("src/cli/hengshi"), "hash-key"}, std::chrono::seconds(30), input);
    std::remove(input.c_str());
    EXPECT_EQ(hashed.exit_code, 0) << hashed.output;
    return hashed.stdout_text.substr(hashed.stdout_text.find(": ") + 2, 64);
  }

  std::unique_ptr<ChildProcess> start_gateway() {
    const std::string config = temp_path("fleet.yaml");
    files_.push_back(config);
    const std::string url = sim_->base_url() + "/v1";
    std::ofstream(config) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", threads: 2, "
                             "expose_figures: true, auth: on, keys_file: "
                          << keys_path_ << "}\n"
                          << "log: {requests: \"\"}\n"
                          << "pools:\n"
                          << "  cloud-small: {members: [{name: s, base_url: \"" << url << "\", model: sim-small}]}\n"
                          << "  cloud-large: {members: [{name: l, base_url: \"" << url << "\", model: sim-large}]}\n"
                          << "cache:\n  threshold: 0.8\n  redis: {host: 127.0.0.1, port: " << redis_->port()
                          << ", timeout_ms: 200, retry_ms: 200, fleet_size: 2}\n";
    return std::make_unique<ChildProcess>(
        ChildProcess::start({binary_path("src/cli/hengshi"), "serve", "--config", config}));
  }

  HttpResult ask(ChildProcess& gateway, const std::string& text, const json& extra = json::object(),
                 const char* secret = kSecret) {
    json body = {{"model", "cloud-small"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    body.update(extra);
    HttpRequest request{"POST", "/v1/chat/completions", body.dump(), "application/json",
                        {{"Authorization", std::string("Bearer ") + secret}}};
    return http_call(gateway.host(), gateway.port(), request);
  }
  json cache_stats(ChildProcess& gateway) {
    return http_call(gateway.host(), gateway.admin_port(), {"GET", "/admin/cache/stats", "", "", {}}).json();
  }
  HttpResult invalidate(ChildProcess& gateway, const std::string& body) {
    return http_call(gateway.host(), gateway.admin_port(),
                     {"POST", "/admin/cache/invalidate", body, "application/json", {}});
  }
  int sim_requests() {
    return http_call(sim_->host(), sim_->port(), {"GET", "/admin/stats", "", "", {}}).json()["requests_total"].get<int>();
  }
  // Keeps a test that counts requests per minute window off a window's edge.
  static void away_from_a_minute_boundary() {
    wait_until(
        [] {
          const auto s = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count() %
                         60;
          return s >= 2 && s <= 50;
        },
        std::chrono::seconds(15));
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<ChildProcess> sim_;
  std::unique_ptr<ChildProcess> a_;
  std::unique_ptr<ChildProcess> b_;
  std::string keys_path_;
  std::vector<std::string> files_;  // the gateways' configs, removed after the test
};

TEST_F(GatewayRedisTest, AnAnswerCachedByOneIsAHitOnTheOtherAndAnInvalidationReachesBoth) {
  const json tagged = {{"hengshi", {{"tags", {"fleet-faq"}}}}};
  auto first = ask(*a_, "How long does delivery take to Shenzhen?", tagged);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["hengshi"]["cache"], "miss");
  // The write-through runs off A's request path: wait until Redis holds the entry. B never saw
  // the question: its local miss reads Redis (or the fill announcement got there first).
  ASSERT_TRUE(wait_until([&] { return redis_->command("KEYS *e:*").find("e:") != std::string::npos; },
                         milliseconds(2000)));
  auto shared = ask(*b_, "How long does delivery take to Shenzhen?", tagged);
  ASSERT_EQ(shared.status, 200) << shared.body;
  EXPECT_EQ(shared.json()["hengshi"]["cache"], "exact") << shared.body;
  EXPECT_EQ(shared.json()["hengshi"]["figures"]["cache_source"], "cloud-small");
  EXPECT_EQ(sim_requests(), 1);
  // A fill is announced: B indexes A's new entry, so a paraphrase is a semantic hit there too.
  const int entries_before = cache_stats(*b_)["entries"].get<int>();
  ASSERT_EQ(ask(*a_, "How do I change the delivery address of my parcel?").status, 200);
  ASSERT_TRUE(wait_until([&] { return cache_stats(*b_)["entries"].get<int>() > entries_before; }, milliseconds(2000)));
  auto paraphrase = ask(*b_, "How do I change the delivery address of my parcel please?");
  EXPECT_EQ(paraphrase.json()["hengshi"]["cache"], "semantic") << paraphrase.body;
  EXPECT_EQ(sim_requests(), 2);

  // An invalidation on A removes the entry from Redis and from B's local tier within a second.
  const int b_entries = cache_stats(*b_)["entries"].get<int>();
  const auto sent = std::chrono::steady_clock::now();
  auto removed = invalidate(*a_, R"({"tags": ["fleet-faq"]})");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_GE(removed.json()["removed"].get<int>(), 1);
  ASSERT_TRUE(wait_until([&] { return cache_stats(*b_)["entries"].get<int>() < b_entries; }, milliseconds(1000)))
      << "B still holds the invalidated entry after a second";
  EXPECT_LT(std::chrono::steady_clock::now() - sent, milliseconds(1000));
  EXPECT_EQ(ask(*b_, "How long does delivery take to Shenzhen?", tagged).json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(sim_requests(), 3);
}

TEST_F(GatewayRedisTest, AKeysRpmHoldsAcrossTheFleet) {
  away_from_a_minute_boundary();
  int admitted = 0;
  int refused = 0;
  // rpm 4 for the key, shared: 6 requests spread over both gateways admit exactly 4.
  for (int i = 0; i < 6; ++i) {
    auto reply = ask(i % 2 == 0 ? *a_ : *b_, "rpm question " + std::to_string(i), json::object(), kLimited);
    if (reply.status == 200) ++admitted;
    if (reply.status == 429) {
      ++refused;
      EXPECT_EQ(reply.json()["error"]["code"], "rate_limit_exceeded") << reply.body;
      EXPECT_FALSE(reply.header("retry-after").empty());
    }
  }
  EXPECT_EQ(admitted, 4);
  EXPECT_EQ(refused, 2);
}

TEST_F(GatewayRedisTest, KillingRedisFailsNoRequest) {
  ASSERT_EQ(ask(*a_, "What payment methods do you take?").status, 200);
  ASSERT_TRUE(wait_until([&] { return cache_stats(*b_)["entries"].get<int>() == 1; }, milliseconds(2000)));
  ASSERT_EQ(ask(*b_, "What payment methods do you take?").json()["hengshi"]["cache"], "exact");
  redis_->kill();
  // Without Redis each gateway serves from its local tier.
  int ok = 0;
  for (auto* gateway : {a_.get(), b_.get()}) {
    for (int i = 0; i < 3; ++i) {
      auto reply = ask(*gateway, i == 0 ? "What payment methods do you take?" : "Do you accept Alipay " + std::to_string(i));
      EXPECT_EQ(reply.status, 200) << reply.body;
      if (reply.status == 200) ++ok;
    }
  }
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(ask(*b_, "What payment methods do you take?").json()["hengshi"]["cache"], "exact")
      << "B's local tier still answers";
  // ... and enforces its share of a key's limits: rpm 4 over 2 gateways is 2 here.
  away_from_a_minute_boundary();
  int limited_ok = 0;
  for (int i = 0; i < 3; ++i) {
    if (ask(*a_, "limited " + std::to_string(i), json::object(), kLimited).status == 200) ++limited_ok;
  }
  EXPECT_EQ(limited_ok, 2);
  for (auto* gateway : {a_.get(), b_.get()}) {
    const json ready = http_call(gateway->host(), gateway->port(), {"GET", "/readyz", "", "", {}}).json();
    EXPECT_EQ(ready["status"], "ready");
    EXPECT_EQ(ready["cache"]["redis"], "down") << ready.dump();
    const std::string metrics = http_call(gateway->host(), gateway->admin_port(), {"GET", "/metrics", "", "", {}}).body;
    EXPECT_NE(metrics.find("hengshi_cache_redis_up 0"), std::string::npos);
    EXPECT_NE(metrics.find("hengshi_cache_redis_errors_total"), std::string::npos);
  }
}

}  // namespace
}  // namespace hengshi::testing
