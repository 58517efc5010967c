#include "server/key_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "server/admin_handler.h"
#include "server/http_exchange.h"

namespace hengshi::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string hash_line(const std::string& key) { return to_hex(sha256(key)); }

TEST(KeyHashTest, Sha256MatchesTheStandardVector) {
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(KeyFileTest, ParsesEveryField) {
  auto keys = parse_keys(
      "keys:\n"
      "  - name: team-a\n"
      "    sha256: " +
          hash_line("sk-a") +
          "\n"
          "    models: [auto, edge]\n"
          "    pools: [cloud-small]\n"
          "    rpm: 600\n"
          "    tpm: 100000\n"
          "    budget: 25.5\n"
          "  - name: team-b\n"
          "    sha256: " +
          hash_line("sk-b") + "\n",
      "keys.yaml");
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  ASSERT_EQ((*keys)->keys.size(), 2u);
  const ClientKey& a = *(*keys)->keys[0];
  EXPECT_EQ(a.name, "team-a");
  EXPECT_EQ(a.rpm, 600);
  EXPECT_EQ(a.tpm, 100000);
  ASSERT_TRUE(a.budget);
  EXPECT_DOUBLE_EQ(*a.budget, 25.5);
  EXPECT_TRUE(a.allows_model("edge"));
  EXPECT_FALSE(a.allows_model("cloud-large"));
  EXPECT_TRUE(a.allows_pool("cloud-small"));
  EXPECT_FALSE(a.allows_pool("cloud-large"));
  const ClientKey& b = *(*keys)->keys[1];
  EXPECT_TRUE(b.allows_model("anything"));
  EXPECT_TRUE(b.allows_pool("cloud-large"));
  EXPECT_EQ(b.rpm, 0);
  EXPECT_FALSE(b.budget);
}

TEST(KeyFileTest, ErrorsNameFileFieldAndReason) {
  const std::string good = hash_line("sk-a");
  struct Case {
    std::string yaml;
    std::string field;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"", "keys", "required"},
      {"keys: 3\n", "keys", "list"},
      {"keys:\n  - sha256: " + good + "\n", "keys[0].name", "required"},
      {"keys:\n  - name: a\n", "keys[0].sha256", "required"},
      {"keys:\n  - name: a\n    sha256: abc\n", "keys[0].sha256", "64 hex"},
      {"keys:\n  - name: a\n    sha256: " + std::string(64, 'g') + "\n", "keys[0].sha256",
       "64 hex"},
      {"keys:\n  - name: a\n    key: sk-plain\n", "keys[0].key", "never stored"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n    rpm: -1\n", "keys[0].rpm", "> 0"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n    tpm: x\n", "keys[0].tpm", "integer"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n    budget: -2\n", "keys[0].budget", ">= 0"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n    models: []\n", "keys[0].models", "empty"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n    colour: red\n", "keys[0].colour",
       "unknown"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n  - name: a\n    sha256: " + hash_line("x") +
           "\n",
       "keys[1].name", "twice"},
      {"keys:\n  - name: a\n    sha256: " + good + "\n  - name: b\n    sha256: " + good + "\n",
       "keys[1].sha256", "twice"},
  };
  for (const auto& c : cases) {
    auto keys = parse_keys(c.yaml, "team-keys.yaml");
    ASSERT_FALSE(keys.ok()) << c.yaml;
    EXPECT_THAT(keys.error().message, HasSubstr("team-keys.yaml: " + c.field + ": ")) << c.yaml;
    EXPECT_THAT(keys.error().message, HasSubstr(c.reason)) << c.yaml;
  }
  auto broken = parse_keys("keys: [\n", "team-keys.yaml");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.error().message, HasSubstr("team-keys.yaml: line"));
}

TEST(KeyFileTest, AnErrorNeverEchoesTheKeyMaterial) {
  auto keys = parse_keys("keys:\n  - name: a\n    key: sk-very-secret\n", "k.yaml");
  ASSERT_FALSE(keys.ok());
  EXPECT_THAT(keys.error().message, Not(HasSubstr("sk-very-secret")));
}

TEST(KeyLookupTest, FindsTheMatchingKeyAmongMany) {
  std::string yaml = "keys:\n";
  for (int i = 0; i < 50; ++i) {
    yaml += "  - {name: k" + std::to_string(i) +
            ", sha256: " + hash_line("secret-" + std::to_string(i)) + "}\n";
  }
  auto keys = parse_keys(yaml, "k.yaml");
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  for (int i : {0, 17, 49}) {
    auto found = (*keys)->find("secret-" + std::to_string(i));
    ASSERT_TRUE(found);
    EXPECT_EQ(found->name, "k" + std::to_string(i));
  }
  EXPECT_FALSE((*keys)->find("secret-50"));
  EXPECT_FALSE((*keys)->find(""));
  EXPECT_FALSE((*keys)->find("secret-1 "));
  // The digest itself is not a key: presenting the stored hash must not authenticate.
  EXPECT_FALSE((*keys)->find(hash_line("secret-3")));
}

TEST(BearerTokenTest, ReadsTheSdkHeaderShape) {
  EXPECT_EQ(bearer_token("Bearer sk-abc"), "sk-abc");
  EXPECT_EQ(bearer_token("bearer  sk-abc "), "sk-abc");
  EXPECT_EQ(bearer_token("Basic dXNlcjpwYXNz"), "");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token(""), "");
}

TEST(AdminHostTest, StripsPortAndScheme) {
  EXPECT_EQ(host_without_port("127.0.0.1:8081", false), "127.0.0.1");
  EXPECT_EQ(host_without_port("LocalHost", false), "localhost");
  EXPECT_EQ(host_without_port("[::1]:8081", false), "[::1]");
  EXPECT_EQ(host_without_port("http://evil.example:8081/x", true), "evil.example");
  EXPECT_EQ(host_without_port("http://[::1]:9", true), "[::1]");
  EXPECT_EQ(host_without_port("null", true), "");
}

class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hengshi_key_store_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "keys.yaml").string();
    level_ = spdlog::default_logger()->level();
    spdlog::set_level(spdlog::level::off);
  }
  void TearDown() override {
    spdlog::set_level(level_);
    std::filesystem::remove_all(dir_);
  }
  void write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  static std::string one_key(const std::string& name, const std::string& secret) {
    return "  - {name: " + name + ", sha256: " + hash_line(secret) + "}\n";
  }

  std::filesystem::path dir_;
  std::string path_;
  spdlog::level::level_enum level_{};
};

TEST_F(KeyStoreTest, OpenRefusesABadFileWithItsReason) {
  write("keys:\n  - name: a\n");
  auto store = KeyStore::open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.error().message, HasSubstr(path_ + ": keys[0].sha256"));
  auto missing = KeyStore::open((dir_ / "nope.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("server.keys_file"));
}

TEST_F(KeyStoreTest, ReloadSwapsKeysAndABadFileKeepsTheOldOnes) {
  write("keys:\n" + one_key("a", "sk-a"));
  auto opened = KeyStore::open(path_);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  KeyStore& store = **opened;
  auto held = store.keys();  // a request in flight keeps its snapshot
  EXPECT_TRUE(store.authenticate("sk-a"));
  EXPECT_FALSE(store.authenticate("sk-b"));

  write("keys:\n" + one_key("a", "sk-a") + one_key("b", "sk-b"));
  auto reloaded = store.reload("test");
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ(*reloaded, 2u);
  EXPECT_EQ(store.authenticate("sk-b")->name, "b");
  EXPECT_EQ(held->keys.size(), 1u);

  write("keys:\n  - name: broken\n");
  auto rejected = store.reload("test");
  ASSERT_FALSE(rejected.ok());
  EXPECT_THAT(rejected.error().message, HasSubstr("keys[0].sha256"));
  EXPECT_TRUE(store.authenticate("sk-a"));
  EXPECT_TRUE(store.authenticate("sk-b"));
}

TEST_F(KeyStoreTest, AConnectionsProvedKeyHoldsOnlyForTheSameSecretAndTheSameKeySet) {
  write("keys:\n" + one_key("a", "sk-a") + one_key("b", "sk-b"));
  auto opened = KeyStore::open(path_);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  KeyStore& store = **opened;
  ConnectionMemo memo;
  EXPECT_EQ(store.authenticate("sk-a", memo)->name, "a");
  EXPECT_EQ(memo.proved_in, store.keys());
  EXPECT_EQ(store.authenticate("sk-a", memo)->name, "a");  // remembered
  // Another key on the same connection is proved on its own, never taken from the memo.
  EXPECT_FALSE(store.authenticate("sk-a2", memo));
  EXPECT_FALSE(store.authenticate("sk-", memo));
  EXPECT_EQ(store.authenticate("sk-b", memo)->name, "b");
  EXPECT_EQ(memo.proved_key->name, "b");

  // A reload that revokes b: the memo's proof was against the old set, so b is refused at once.
  write("keys:\n" + one_key("a", "sk-a"));
  ASSERT_TRUE(store.reload("test").ok());
  EXPECT_FALSE(store.authenticate("sk-b", memo));
  EXPECT_EQ(store.authenticate("sk-a", memo)->name, "a");
}

TEST_F(KeyStoreTest, PollReloadsOnlyAFileThatStayedTheSameOverTwoPolls) {
  write("keys:\n" + one_key("a", "sk-a"));
  auto opened = KeyStore::open(path_);
  ASSERT_TRUE(opened.ok());
  KeyStore& store = **opened;
  store.poll();  // unchanged: nothing happens
  EXPECT_EQ(store.keys()->keys.size(), 1u);

  // A half-written file (valid YAML, but a key without its hash) is seen once, then completed
  // before the next poll: it must never be loaded, and the complete file must be.
  write("keys:\n" + one_key("a", "sk-a") + "  - {name: b");
  store.poll();
  EXPECT_FALSE(store.authenticate("sk-b"));
  write("keys:\n" + one_key("a", "sk-a") + one_key("b", "sk-b"));
  store.poll();  // changed since the last poll: still waiting
  EXPECT_FALSE(store.authenticate("sk-b"));
  store.poll();  // stable over two polls: loaded
  EXPECT_TRUE(store.authenticate("sk-b"));
  EXPECT_EQ(store.keys()->keys.size(), 2u);
}

TEST_F(KeyStoreTest, PollKeepsTheOldKeysWhenTheStableFileIsBad) {
  write("keys:\n" + one_key("a", "sk-a"));
  auto opened = KeyStore::open(path_);
  ASSERT_TRUE(opened.ok());
  KeyStore& store = **opened;
  write("keys: [oops\n");
  store.poll();
  store.poll();
  EXPECT_TRUE(store.authenticate("sk-a"));
  store.poll();  // the bad file is not retried on every poll
  EXPECT_TRUE(store.authenticate("sk-a"));
}

}  // namespace
}  // namespace hengshi::server
