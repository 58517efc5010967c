#include "sim/profile.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace hengshi::sim {
namespace {

std::string error_of(const Result<Profile>& result) {
  return result.ok() ? std::string("<ok>") : result.error().message;
}

TEST(ProfileTest, EmptyProfileIsAFastHealthyUpstream) {
  auto profile = parse_profile_yaml_text("", "empty.yaml");
  ASSERT_TRUE(profile.ok()) << error_of(profile);
  const Behaviour& b = profile->defaults;
  EXPECT_EQ(b.latency_ms, (LatencyPercentiles{0, 0}));
  EXPECT_EQ(b.ttft_ms, (LatencyPercentiles{0, 0}));
  EXPECT_EQ(b.tokens_per_s, 0);
  EXPECT_EQ(b.output_tokens, (TokenRange{8, 32}));
  EXPECT_EQ(b.error_rate + b.rate_limit_rate + b.hang_rate + b.disconnect_rate + b.garbage_rate, 0);
  EXPECT_EQ(b.retry_after_s, 1);
  EXPECT_EQ(b.disconnect_after_chunks, 2);
  EXPECT_TRUE(profile->models.empty());
  EXPECT_EQ(*profile, Profile{});
}

TEST(ProfileTest, YamlModelOverridesInheritTheTopLevel) {
  auto profile = parse_profile_yaml_text(R"(
latency_ms: {p50: 120, p95: 400}
ttft_ms: {p50: 50, p95: 90}
tokens_per_s: 40
output_tokens: {min: 4, max: 6}
error_rate: 0.05
rate_limit_rate: 0.1
retry_after_s: 3
models:
  gpt-large:
    latency_ms: {p50: 900, p95: 2000}
    error_rate: 0.5
  "quoted-model": {}
)",
                                         "pools.yaml");
  ASSERT_TRUE(profile.ok()) << error_of(profile);
  EXPECT_EQ(profile->defaults.latency_ms, (LatencyPercentiles{120, 400}));
  EXPECT_EQ(profile->defaults.tokens_per_s, 40);
  EXPECT_EQ(profile->defaults.output_tokens, (TokenRange{4, 6}));
  EXPECT_EQ(profile->defaults.retry_after_s, 3);

  const Behaviour& large = profile->for_model("gpt-large");
  EXPECT_EQ(large.latency_ms, (LatencyPercentiles{900, 2000}));
  EXPECT_DOUBLE_EQ(large.error_rate, 0.5);
  EXPECT_DOUBLE_EQ(large.rate_limit_rate, 0.1);  // inherited
  EXPECT_EQ(large.ttft_ms, (LatencyPercentiles{50, 90}));
  EXPECT_EQ(profile->for_model("quoted-model"), profile->defaults);
  EXPECT_EQ(&profile->for_model("unknown"), &profile->defaults);
}

TEST(ProfileTest, JsonRoundTripIsExact) {
  auto profile = parse_profile_yaml_text(
      "hang_rate: 0.25\ngarbage_rate: 0.25\ndisconnect_after_chunks: 5\n"
      "models: {m1: {disconnect_rate: 0.5, output_tokens: {min: 1, max: 1}}}\n",
      "a.yaml");
  ASSERT_TRUE(profile.ok()) << error_of(profile);
  auto again = parse_profile_json(profile->to_json(), "round-trip");
  ASSERT_TRUE(again.ok()) << error_of(again);
  EXPECT_EQ(*again, *profile);
  EXPECT_EQ(again->to_json(), profile->to_json());
}

TEST(ProfileTest, LatencyWithOnlyP50IsFixed) {
  auto profile = parse_profile_json_text(R"({"latency_ms": {"p50": 30}})", "body");
  ASSERT_TRUE(profile.ok()) << error_of(profile);
  EXPECT_EQ(profile->defaults.latency_ms, (LatencyPercentiles{30, 30}));
}

TEST(ProfileTest, UnknownFieldNamesSourceAndField) {
  auto profile = parse_profile_yaml_text("latncy_ms: {p50: 1}\n", "conf/sim.yaml");
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.error().code, "profile_invalid");
  EXPECT_EQ(profile.error().message, "conf/sim.yaml: latncy_ms: unknown field");
}

TEST(ProfileTest, ModelFieldErrorsNameThePath) {
  auto profile = parse_profile_yaml_text("models:\n  gpt-x:\n    error_rate: 1.5\n", "p.yaml");
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(error_of(profile).find("p.yaml: models.gpt-x.error_rate: must be between 0 and 1"),
            std::string::npos)
      << error_of(profile);

  profile = parse_profile_yaml_text("models:\n  gpt-x:\n    models: {}\n", "p.yaml");
  EXPECT_NE(error_of(profile).find("models.gpt-x.models"), std::string::npos) << error_of(profile);
}

TEST(ProfileTest, RejectsBadValues) {
  struct Case {
    const char* yaml;
    const char* expected;  // a fragment of the message
  };
  const Case cases[] = {
      {"latency_ms: {p50: 100, p95: 50}", "latency_ms: p95 must be >= p50"},
      {"ttft_ms: {p50: 0, p95: 50}", "ttft_ms: p50 must be > 0"},
      {"ttft_ms: {p50: 1, p99: 5}", "ttft_ms.p99: unknown field"},
      {"latency_ms: 5", "latency_ms: must be an object"},
      {"output_tokens: {min: 10, max: 5}", "output_tokens: min (10) must be <= max (5)"},
      {"output_tokens: {min: 0}", "output_tokens.min: must be between 1"},
      {"output_tokens: {min: 2.5}", "output_tokens.min: must be an integer"},
      {"error_rate: high", "error_rate: must be a number"},
      {"error_rate: \"0.5\"", "error_rate: must be a number"},
      {"tokens_per_s: -1", "tokens_per_s: must be between 0"},
      {"retry_after_s: -2", "retry_after_s: must be between 0"},
      {"error_rate: 0.6\nhang_rate: 0.5", "<top level>: error_rate + rate_limit_rate"},
      {"models: [a, b]", "models: must be a map"},
      {"[1, 2]", "<top level>: must be an object"},
      {"error_rate: [0.5", "not valid YAML"},
  };
  for (const Case& c : cases) {
    auto profile = parse_profile_yaml_text(c.yaml, "bad.yaml");
    ASSERT_FALSE(profile.ok()) << c.yaml;
    EXPECT_NE(profile.error().message.find(c.expected), std::string::npos)
        << c.yaml << " -> " << profile.error().message;
    EXPECT_EQ(profile.error().message.rfind("bad.yaml: ", 0), 0u) << profile.error().message;
  }
}

TEST(ProfileTest, JsonTextErrors) {
  EXPECT_EQ(error_of(parse_profile_json_text("{nope", "POST /admin/profile")),
            "POST /admin/profile: not valid JSON");
  EXPECT_EQ(error_of(parse_profile_json_text(R"({"garbage_rate": 2})", "POST /admin/profile")),
            "POST /admin/profile: garbage_rate: must be between 0 and 1 (got 2)");
}

TEST(ProfileTest, LoadsFilesByExtension) {
  std::string dir = ::testing::TempDir();
  std::string yaml_path = dir + "/sim_profile_test.yaml";
  std::string json_path = dir + "/sim_profile_test.json";
  std::ofstream(yaml_path) << "error_rate: 0.25\n";
  std::ofstream(json_path) << R"({"rate_limit_rate": 0.5, "retry_after_s": 7})";

  auto from_yaml = load_profile_file(yaml_path);
  ASSERT_TRUE(from_yaml.ok()) << error_of(from_yaml);
  EXPECT_DOUBLE_EQ(from_yaml->defaults.error_rate, 0.25);
  EXPECT_EQ(from_yaml->source, yaml_path);

  auto from_json = load_profile_file(json_path);
  ASSERT_TRUE(from_json.ok()) << error_of(from_json);
  EXPECT_EQ(from_json->defaults.retry_after_s, 7);

  auto missing = load_profile_file(dir + "/does-not-exist.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "profile_unreadable");
  EXPECT_NE(missing.error().message.find("does-not-exist.yaml"), std::string::npos);
}

TEST(ProfileTest, ShippedExampleProfilesAreValid) {
  // tools/sim/profiles/*.yaml, found from this file's path (CMake compiles it by absolute path).
  namespace fs = std::filesystem;
  fs::path dir = fs::path(__FILE__).parent_path() / ".." / ".." / "tools" / "sim" / "profiles";
  if (const char* source_dir = std::getenv("HENGSHI_SOURCE_DIR")) {
    dir = fs::path(source_dir) / "tools" / "sim" / "profiles";
  }
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    auto profile = load_profile_file(entry.path().string());
    EXPECT_TRUE(profile.ok()) << error_of(profile);
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

}  // namespace
}  // namespace hengshi::sim
