// Client keys and the admin listener against a real gateway in front of real sims (issue 8 §2):
// 401/403/429 in OpenAI's shape, the key's name (never the key) in metadata, log and metrics,
// hot reload of the keys file, start refusal off loopback, and the admin listener's guards.
#include <gmock/gmock.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "integration/gateway_fixture.h"

namespace hengshi::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAdminTokenEnv = "HENGSHI_AUTH_TEST_ADMIN_TOKEN";
constexpr const char* kAdminToken = "adm-7f3e-test-token";
const std::string kKeyA = "sk-team-a-0123456789abcdef";
const std::string kKeyB = "sk-team-b-fedcba9876543210";
const std::string kKeyLimited = "sk-limited-5555";
const std::string kKeyPoor = "sk-poor-4444";

// The keys file's hash of `key`, from `hengshi hash-key` as an operator would make it.
std::string hash_of(const std::string& key) {
  static std::map<std::string, std::string> cache;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::string input = temp_path("key.txt");
  std::ofstream(input) << key << "\n";
  auto finished = ChildProcess::run({binary_path("src/cli/hengshi"), "hash-key"},
                                    std::chrono::seconds(30), input);
  std::remove(input.c_str());
  EXPECT_EQ(finished.exit_code, 0) << finished.output;
  const std::string prefix = "sha256: ";
  std::string line = finished.stdout_text.substr(0, finished.stdout_text.find('\n'));
  EXPECT_EQ(line.rfind(prefix, 0), 0u) << finished.output;
  std::string hex = line.size() > prefix.size() ? line.substr(prefix.size()) : "";
  EXPECT_EQ(hex.size(), 64u) << finished.output;
  cache[key] = hex;
  return hex;
}

TEST(HashKeyCommandTest, PrintsTheSha256LineAndNeverTheKey) {
  // SHA-256("abc"), the standard test vector.
  EXPECT_EQ(hash_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto empty =
      ChildProcess::run({binary_path("src/cli/hengshi"), "hash-key"}, std::chrono::seconds(30));
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
}

std::string key_entry(const std::string& name, const std::string& key,
                      const std::string& extra = "") {
  return "  - name: " + name + "\n    sha256: " + hash_of(key) + "\n" + extra;
}

class GatewayAuthTest : public GatewayFixture {
 protected:
  void SetUp() override {
    ::setenv(kAdminTokenEnv, kAdminToken, 1);
    keys_path_ = temp_path("keys.yaml");
    write_keys(base_keys());
    GatewayOptions options;
    options.extra_server_yaml =
        "  keys_file: " + keys_path_ + "\n  admin_token_env: " + kAdminTokenEnv + "\n";
    options.extra_yaml = "routing:\n  watch_interval_ms: 20\n";
    start(options);
  }
  void TearDown() override {
    GatewayFixture::TearDown();
    std::remove(keys_path_.c_str());
  }

  static std::string base_keys() {
    return "keys:\n" + key_entry("team-a", kKeyA) +
           key_entry("small-only", kKeyB,
                     "    models: [auto, cloud-small, cloud-large]\n    pools: [cloud-small]\n") +
           key_entry("limited", kKeyLimited, "    rpm: 2\n") +
           key_entry("poor", kKeyPoor, "    budget: 0.000001\n");
  }
  void write_keys(const std::string& text) {
    // Written to a side file and renamed, as an operator's tooling would.
    std::string side = keys_path_ + ".tmp";
    std::ofstream(side, std::ios::trunc) << text;
    std::rename(side.c_str(), keys_path_.c_str());
  }
  static std::map<std::string, std::string> bearer(const std::string& key) {
    return {{"Authorization", "Bearer " + key}};
  }
  std::map<std::string, std::string> admin_auth() { return bearer(kAdminToken); }
  std::string log_text() {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void expect_openai_error(const HttpResult& reply, int status, const std::string& code) {
    EXPECT_EQ(reply.status, status) << reply.body;
    auto body = nlohmann::json::parse(reply.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << reply.body;
    EXPECT_EQ(body["error"]["code"], code) << reply.body;
    EXPECT_TRUE(body["error"]["message"].is_string()) << reply.body;
    EXPECT_TRUE(body["error"]["type"].is_string()) << reply.body;
    EXPECT_TRUE(body["error"].contains("param")) << reply.body;
  }

  std::string keys_path_;
};

TEST_F(GatewayAuthTest, MissingOrWrongKeyIs401InOpenAIShapeAndHealthStaysOpen) {
  auto missing = chat(user_message("cloud-small", "hello"));
  expect_openai_error(missing, 401, "invalid_api_key");
  EXPECT_EQ(missing.json()["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(missing.json()["error"]["param"].is_null());

  auto wrong = chat(user_message("cloud-small", "hello"), bearer("sk-not-a-key-999"));
  expect_openai_error(wrong, 401, "invalid_api_key");
  EXPECT_THAT(wrong.body, Not(HasSubstr("sk-not-a-key-999")));
  // The stored hash is not a key.
  expect_openai_error(chat(user_message("cloud-small", "hello"), bearer(hash_of(kKeyA))), 401,
                      "invalid_api_key");
  expect_openai_error(
      chat(user_message("cloud-small", "hello"), {{"Authorization", "Basic " + kKeyA}}), 401,
      "invalid_api_key");
  EXPECT_EQ(http_call(gateway_->host(), gateway_->port(), {"GET", "/v1/models", "", "", {}}).status,
            401);
  EXPECT_EQ(
      http_call(gateway_->host(), gateway_->port(), {"GET", "/v1/models", "", "", bearer(kKeyA)})
          .status,
      200);
  EXPECT_EQ(get("/healthz").status, 200);
  EXPECT_EQ(get("/readyz").status, 200);
  EXPECT_EQ(sim_requests(*small_), 0);

  auto metrics = admin_get("/metrics", admin_auth());
  EXPECT_THAT(metrics.body, HasSubstr("hengshi_auth_failures_total{reason=\"missing_key\"}"));
  EXPECT_THAT(metrics.body, HasSubstr("hengshi_auth_failures_total{reason=\"invalid_key\"}"));
}

TEST_F(GatewayAuthTest, GoodKeyAnswersAndOnlyItsNameAppearsInMetaLogAndMetrics) {
  auto reply = chat(user_message("cloud-small", "hello"), bearer(kKeyA));
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.json()["hengshi"]["key"], "team-a");
  auto streamed = chat(user_message("cloud-small", "hello", true), bearer(kKeyA));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_THAT(streamed.body, HasSubstr("\"key\":\"team-a\""));

  ASSERT_TRUE(wait_until([&] {
    std::string log = log_text();
    return std::count(log.begin(), log.end(), '\n') >= 2;
  }));
  std::string log = log_text();
  EXPECT_THAT(log, HasSubstr("\"key\":\"team-a\""));
  std::string metrics;
  ASSERT_TRUE(wait_until([&] {
    metrics = admin_get("/metrics", admin_auth()).body;
    return metrics.find("hengshi_key_spend_total{key=\"team-a\"}") != std::string::npos;
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr("hengshi_key_requests_total{key=\"team-a\"} 2"));
  for (const std::string& text : {log, metrics, reply.body, streamed.body}) {
    EXPECT_THAT(text, Not(HasSubstr(kKeyA)));
    EXPECT_THAT(text, Not(HasSubstr(hash_of(kKeyA))));
  }
  EXPECT_THAT(gateway_->output(), Not(HasSubstr(kKeyA)));
}

TEST_F(GatewayAuthTest, ModelOutsideTheKeysAllowanceIs403) {
  auto reply = chat(user_message("edge", "hello"), bearer(kKeyB));
  expect_openai_error(reply, 403, "model_not_allowed");
  EXPECT_EQ(reply.json()["error"]["param"], "model");
  EXPECT_EQ(sim_requests(*small_) + sim_requests(*large_), 0);
}

TEST_F(GatewayAuthTest, RouteToAPoolTheKeyMayNotUseIs403) {
  auto reply = chat(user_message("cloud-large", "hello"), bearer(kKeyB));
  expect_openai_error(reply, 403, "pool_not_allowed");
  EXPECT_EQ(sim_requests(*large_), 0);
  auto allowed = chat(user_message("cloud-small", "hello"), bearer(kKeyB));
  EXPECT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(allowed.json()["hengshi"]["key"], "small-only");
}

TEST_F(GatewayAuthTest, RpmLimitIs429WithRetryAfterAndOtherKeysAreUnaffected) {
  for (int i = 0; i < 2; ++i) {
    auto reply = chat(user_message("cloud-small", "hello"), bearer(kKeyLimited));
    ASSERT_EQ(reply.status, 200) << i << reply.body;
  }
  auto limited = chat(user_message("cloud-small", "hello"), bearer(kKeyLimited));
  expect_openai_error(limited, 429, "rate_limit_exceeded");
  const int retry_after = std::atoi(limited.header("retry-after").c_str());
  EXPECT_GE(retry_after, 1) << limited.header("retry-after");
  EXPECT_LE(retry_after, 30);
  EXPECT_EQ(chat(user_message("cloud-small", "hello"), bearer(kKeyA)).status, 200);
  EXPECT_THAT(admin_get("/metrics", admin_auth()).body,
              HasSubstr("hengshi_key_rate_limited_total{key=\"limited\",limit=\"rpm\"} 1"));
}

TEST_F(GatewayAuthTest, SpentBudgetIs429InsufficientQuota) {
  auto first = chat(user_message("cloud-small", "hello"), bearer(kKeyPoor));
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_GT(first.json()["hengshi"]["cost"].get<double>(), 0.000001);
  // Spend is charged when the request is logged, just after the answer.
  ASSERT_TRUE(wait_until([&] { return log_text().find("\"key\":\"poor\"") != std::string::npos; }));
  auto refused = chat(user_message("cloud-small", "hello"), bearer(kKeyPoor));
  expect_openai_error(refused, 429, "insufficient_quota");
  EXPECT_EQ(sim_requests(*small_), 1);
}

TEST_F(GatewayAuthTest, ASessionIdIsScopedToItsKey) {
  const std::string complex_text =
      "Compare PostgreSQL and MySQL for an analytics workload. Explain the trade-offs step by "
      "step, "
      "analyze why each choice matters, what the pros and cons are, and give the answer as a table "
      "in JSON format with at most 10 rows. Why would one be faster? How do indexes differ?";
  auto with_session = [](std::string key) {
    auto headers = bearer(key);
    headers["X-Hengshi-Session"] = "shared-session-1";
    return headers;
  };
  auto complex = chat(user_message("auto", complex_text), with_session(kKeyA));
  ASSERT_EQ(complex.status, 200) << complex.body;
  ASSERT_EQ(complex.json()["hengshi"]["route"], "cloud-large") << complex.body;
  // The same key's next simple turn stays on the session's route...
  auto same_key = chat(user_message("auto", "hi"), with_session(kKeyA));
  ASSERT_EQ(same_key.status, 200) << same_key.body;
  EXPECT_EQ(same_key.json()["hengshi"]["reason"], "session_sticky") << same_key.body;
  // ...but another key naming the same session id starts fresh.
  auto other_key = chat(user_message("auto", "hi"), with_session(kKeyLimited));
  ASSERT_EQ(other_key.status, 200) << other_key.body;
  EXPECT_NE(other_key.json()["hengshi"]["reason"], "session_sticky") << other_key.body;
  EXPECT_EQ(other_key.json()["hengshi"]["route"], "cloud-small") << other_key.body;
}

TEST_F(GatewayAuthTest, KeysFileHotReloadsAndABrokenFileKeepsTheOldKeys) {
  const std::string new_key = "sk-new-team-c-31337";
  EXPECT_EQ(chat(user_message("cloud-small", "hi"), bearer(new_key)).status, 401);

  // The file watcher picks up a complete, stable file.
  write_keys(base_keys() + key_entry("team-c", new_key));
  ASSERT_TRUE(wait_until([&] {
    return chat(user_message("cloud-small", "hi"), bearer(new_key)).status == 200;
  })) << gateway_->output();

  // A broken file is refused (admin reload says why) and both old keys keep working.
  write_keys("keys:\n  - name: broken\n");
  auto rejected = admin_post("/admin/reload", admin_auth());
  EXPECT_EQ(rejected.status, 422) << rejected.body;
  EXPECT_THAT(rejected.body, HasSubstr("keys[0].sha256"));
  EXPECT_EQ(chat(user_message("cloud-small", "hi"), bearer(new_key)).status, 200);
  EXPECT_EQ(chat(user_message("cloud-small", "hi"), bearer(kKeyA)).status, 200);

  // Removing a key through POST /admin/reload takes effect at once.
  write_keys("keys:\n" + key_entry("team-c", new_key));
  auto applied = admin_post("/admin/reload", admin_auth());
  EXPECT_EQ(applied.status, 200) << applied.body;
  EXPECT_EQ(applied.json()["keys"], 1);
  EXPECT_EQ(chat(user_message("cloud-small", "hi"), bearer(kKeyA)).status, 401);
  EXPECT_EQ(chat(user_message("cloud-small", "hi"), bearer(new_key)).status, 200);
}

TEST_F(GatewayAuthTest, AdminListenerNeedsItsTokenAndRejectsForeignOriginAndHost) {
  EXPECT_EQ(admin_get("/metrics").status, 401);
  EXPECT_EQ(admin_get("/metrics", bearer("wrong-token")).status, 401);
  EXPECT_EQ(admin_get("/metrics", bearer(kKeyA)).status,
            401);  // a client key is not the admin token
  EXPECT_EQ(admin_post("/admin/reload").status, 401);
  auto ok = admin_get("/metrics", admin_auth());
  EXPECT_EQ(ok.status, 200);
  EXPECT_THAT(ok.header("content-type"), HasSubstr("text/plain"));

  auto foreign_origin = admin_auth();
  foreign_origin["Origin"] = "http://evil.example";
  EXPECT_EQ(admin_post("/admin/reload", foreign_origin).status, 403);
  auto own_origin = admin_auth();
  own_origin["Origin"] = "http://127.0.0.1:" + std::to_string(gateway_->admin_port());
  EXPECT_EQ(admin_get("/metrics", own_origin).status, 200);
  auto rebound = admin_auth();
  rebound["Host"] = "attacker.example:" + std::to_string(gateway_->admin_port());
  EXPECT_EQ(admin_get("/metrics", rebound).status, 403);
  auto localhost = admin_auth();
  localhost["Host"] = "localhost:" + std::to_string(gateway_->admin_port());
  EXPECT_EQ(admin_get("/metrics", localhost).status, 200);

  // The public port has no admin surface, with or without keys.
  EXPECT_EQ(get("/metrics").status, 404);
  EXPECT_EQ(
      http_call(gateway_->host(), gateway_->port(), {"POST", "/admin/reload", "", "", admin_auth()})
          .status,
      404);
  EXPECT_NE(gateway_->admin_port(), gateway_->port());
}

// `hengshi serve` with `args` must exit 2 before accepting anything, naming `field`.
void expect_refusal(const std::vector<std::string>& args, const std::string& field) {
  std::vector<std::string> argv = {binary_path("src/cli/hengshi"), "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto finished = ChildProcess::run(argv, std::chrono::seconds(60));
  ASSERT_TRUE(finished.exit_code.has_value()) << finished.output;
  EXPECT_EQ(*finished.exit_code, 2) << finished.output;
  EXPECT_THAT(finished.output, HasSubstr("refusing to start"));
  EXPECT_THAT(finished.output, HasSubstr(field));
  EXPECT_THAT(finished.output, Not(HasSubstr("listening on")));
}

TEST(GatewayAuthStartTest, NonLoopbackListenerWithoutKeysRefusesToStart) {
  // 0.0.0.0 only as a start-refusal check: the process exits before it binds anything.
  expect_refusal({"--listen", "0.0.0.0:0", "--admin-listen", "127.0.0.1:0"}, "server.keys_file");
  std::string config = temp_path("auth-off.yaml");
  std::ofstream(config) << "server:\n  auth: \"off\"\n";
  expect_refusal({"--config", config, "--listen", "0.0.0.0:0", "--admin-listen", "127.0.0.1:0"},
                 "server.auth");
  std::remove(config.c_str());
}

TEST(GatewayAuthStartTest, BadKeysFileOrAdminSetupRefusesToStart) {
  std::string keys = temp_path("bad-keys.yaml");
  std::ofstream(keys) << "keys:\n  - name: a\n    sha256: nothex\n";
  std::string config = temp_path("bad-keys-config.yaml");
  std::ofstream(config) << "server:\n  keys_file: " << keys << "\n";
  expect_refusal({"--config", config, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
                 "keys[0].sha256");

  std::string admin = temp_path("admin-open.yaml");
  std::ofstream(admin) << "server:\n  admin_token_env: HENGSHI_AUTH_TEST_UNSET_VARIABLE\n";
  ::unsetenv("HENGSHI_AUTH_TEST_UNSET_VARIABLE");
  expect_refusal({"--config", admin, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"},
                 "HENGSHI_AUTH_TEST_UNSET_VARIABLE");
  expect_refusal({"--listen", "127.0.0.1:0", "--admin-listen", "0.0.0.0:0"},
                 "server.admin_token_env");
  for (const auto& path : {keys, config, admin}) std::remove(path.c_str());
}

}  // namespace
}  // namespace hengshi::testing
