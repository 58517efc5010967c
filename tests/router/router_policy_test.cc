#include "router/router_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hengshi::router {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kSource = "policy.yaml";

std::shared_ptr<const RouterPolicy> parse(const std::string& yaml,
                                          const std::string& thresholds_file = "") {
  auto policy = parse_router_policy(yaml, kSource, thresholds_file);
  EXPECT_TRUE(policy.ok()) << (policy.ok() ? "" : policy.error().message);
  return policy.ok() ? *policy : nullptr;
}

// The error message for `yaml`, or "<accepted>".
std::string error_of(const std::string& yaml) {
  auto policy = parse_router_policy(yaml, kSource, "");
  if (policy.ok()) return "<accepted>";
  EXPECT_EQ(policy.error().code, "config_invalid");
  return policy.error().message;
}

TEST(RouterPolicyTest, EmptyTextIsTheEmbeddedDefaults) {
  const auto policy = parse("");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->source, kSource);
  EXPECT_THAT(policy->version, StartsWith("pol-"));
  EXPECT_THAT(policy->version, HasSubstr("+none"));
  EXPECT_FALSE(policy->pii_safe_message.empty());
  EXPECT_FALSE(policy->human_message.empty());
  EXPECT_TRUE(policy->pii.contains("call 13812345678"));
  EXPECT_FALSE(policy->pii.contains("nothing to see"));
  EXPECT_EQ(policy->sensitive.rules().size(), SensitiveSignals::defaults().size());
  EXPECT_EQ(policy->sensitive.match("转人工")->target, "human");
  EXPECT_EQ(policy->capabilities.rows().size(), CapabilityMatrix::defaults().size());
  EXPECT_EQ(policy->capabilities.row("code").edge, EdgeAllowance::no);
  const Band band = policy->thresholds.band("faq", "anything");
  EXPECT_EQ(band.high, Band{}.high);
  EXPECT_EQ(band.low, Band{}.low);
  EXPECT_EQ(policy->confidence.middle_band_route, "cloud-small");
  EXPECT_EQ(policy->confidence.low_band_route, "cloud-small");
  EXPECT_EQ(policy->confidence.out_of_scope_route, "cloud-small");
  EXPECT_EQ(policy->complexity_cloud_large_at, 4);
  EXPECT_EQ(policy->latency.cloud_p90_prior_ms.at("cloud-small"), 1500);
  EXPECT_EQ(policy->latency.cloud_p90_prior_ms.at("cloud-large"), 3000);
  EXPECT_TRUE(policy->sessions.enabled);
  EXPECT_EQ(policy->sessions.window, 3);

  // A document that is only a comment, or null, is the defaults too.
  for (const std::string text : {"# nothing here\n", "~\n"}) {
    const auto same = parse(text);
    ASSERT_NE(same, nullptr) << text;
    EXPECT_EQ(same->sensitive.rules().size(), SensitiveSignals::defaults().size());
  }

  // The embedded policy as load_router_policy gives it.
  auto embedded = load_router_policy("", "");
  ASSERT_TRUE(embedded.ok()) << embedded.error().message;
  EXPECT_EQ((*embedded)->source, "<embedded policy>");
  EXPECT_EQ((*embedded)->version, policy->version);  // same (empty) text, same version
}

TEST(RouterPolicyTest, ReadsEverySection) {
  const auto policy = parse(
      "pii:\n"
      "  safe_message: no PII here please\n"
      "human_message: a human will call you\n"
      "confidence:\n"
      "  default_band: {high: 0.9, low: 0.3}\n"
      "  middle_band_route: cloud-large\n"
      "  low_band_route: human\n"
      "  out_of_scope_route: cloud-large\n"
      "complexity: {cloud_large_at: 5}\n"
      "latency:\n"
      "  edge_intent_ms: 2\n"
      "  edge_llm_ttft_ms: 80\n"
      "  edge_llm_tokens_per_s: 40\n"
      "  expected_output_tokens: 64\n"
      "  cloud_p90_prior_ms: {cloud-small: 900, cloud-large: 2500}\n"
      "sessions: {enabled: false, window: 5, ttl_s: 60, max_sessions: 10}\n");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->pii_safe_message, "no PII here please");
  EXPECT_EQ(policy->human_message, "a human will call you");
  const Band band = policy->thresholds.band("", "");
  EXPECT_EQ(band.high, 0.9);
  EXPECT_EQ(band.low, 0.3);
  EXPECT_EQ(policy->confidence.middle_band_route, "cloud-large");
  EXPECT_EQ(policy->confidence.low_band_route, "human");
  EXPECT_EQ(policy->confidence.out_of_scope_route, "cloud-large");
  EXPECT_EQ(policy->complexity_cloud_large_at, 5);
  EXPECT_EQ(policy->latency.edge_intent_ms, 2);
  EXPECT_EQ(policy->latency.edge_llm_ttft_ms, 80);
  EXPECT_EQ(policy->latency.edge_llm_tokens_per_s, 40);
  EXPECT_EQ(policy->latency.expected_output_tokens, 64);
  EXPECT_EQ(policy->latency.cloud_p90_prior_ms.at("cloud-small"), 900);
  EXPECT_EQ(policy->latency.cloud_p90_prior_ms.at("cloud-large"), 2500);
  EXPECT_FALSE(policy->sessions.enabled);
  EXPECT_EQ(policy->sessions.window, 5);
  EXPECT_EQ(policy->sessions.ttl_s, 60);
  EXPECT_EQ(policy->sessions.max_sessions, 10);
}

TEST(RouterPolicyTest, CustomPiiPatternIsDetected) {
  const auto policy = parse(
      "pii:\n"
      "  patterns:\n"
      "    - {name: employee_id, regex: 'EMP-[0-9]{6}'}\n");
  ASSERT_NE(policy, nullptr);
  const auto matches = policy->pii.find("my badge is EMP-004211, thanks");
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_EQ(matches[0].kind, "custom:employee_id");
  EXPECT_FALSE(policy->pii.contains("EMP-42"));
  EXPECT_TRUE(policy->pii.contains("13812345678"));  // the built-ins stay
}

TEST(RouterPolicyTest, PiiCanBeTurnedOff) {
  const auto policy = parse("pii: {enabled: false}\n");
  ASSERT_NE(policy, nullptr);
  EXPECT_FALSE(policy->pii.contains("13812345678 li.lei@example.com"));
  EXPECT_FALSE(policy->pii.enabled());
  // Router logs this at start and on every reload.
  EXPECT_THAT(pii_disabled_warning(*policy),
              AllOf(HasSubstr("PII detection is disabled"), HasSubstr(kSource)));
  EXPECT_EQ(pii_disabled_warning(*parse("")), "");
}

TEST(RouterPolicyTest, NonTextPartsDefaultToPinAndCanRefuse) {
  EXPECT_EQ(parse("")->pii_non_text_parts, NonTextParts::kPin);
  EXPECT_EQ(parse("pii: {non_text_parts: pin}\n")->pii_non_text_parts, NonTextParts::kPin);
  EXPECT_EQ(parse("pii: {non_text_parts: refuse}\n")->pii_non_text_parts, NonTextParts::kRefuse);
}

TEST(RouterPolicyTest, BadNonTextPartsValueNamesTheField) {
  EXPECT_EQ(error_of("pii: {non_text_parts: forward}\n"),
            "policy.yaml: pii.non_text_parts: must be pin or refuse (got 'forward')");
  EXPECT_EQ(error_of("pii: {non_text_parts: ''}\n"),
            "policy.yaml: pii.non_text_parts: must be pin or refuse (got '')");
  EXPECT_EQ(error_of("pii: {non_text_parts: [pin]}\n"),
            "policy.yaml: pii.non_text_parts: must be a string");
  EXPECT_EQ(error_of("pii: {non_text_parts: Pin}\n"),
            "policy.yaml: pii.non_text_parts: must be pin or refuse (got 'Pin')");
}

TEST(RouterPolicyTest, SensitiveListReplacesTheDefaults) {
  const auto policy = parse(
      "sensitive:\n"
      "  - name: zebra\n"
      "    keywords: [zebra]\n"
      "    target: human\n"
      "  - name: wire\n"
      "    patterns: ['(?i)wire \\d+ dollars']\n"
      "    target: cloud-large\n");
  ASSERT_NE(policy, nullptr);
  ASSERT_EQ(policy->sensitive.rules().size(), 2u);
  EXPECT_EQ(policy->sensitive.match("a Zebra!")->rule, "zebra");
  EXPECT_EQ(policy->sensitive.match("WIRE 500 dollars now")->target, "cloud-large");
  EXPECT_FALSE(policy->sensitive.match("转人工").has_value());
  EXPECT_FALSE(policy->sensitive.match("my card was stolen").has_value());

  // An empty list switches the signals off.
  const auto none = parse("sensitive: []\n");
  ASSERT_NE(none, nullptr);
  EXPECT_FALSE(none->sensitive.match("转人工").has_value());
}

TEST(RouterPolicyTest, CapabilitiesOverrideRowByRow) {
  const auto policy = parse(
      "capabilities:\n"
      "  code: {edge: partial, max_input_tokens: 2048}\n"
      "  faq: {max_output_tokens: 64}\n"
      "  translation: {edge: no}\n");
  ASSERT_NE(policy, nullptr);
  const CapabilityMatrix& matrix = policy->capabilities;
  EXPECT_EQ(matrix.row("code").edge, EdgeAllowance::partial);
  EXPECT_EQ(matrix.row("code").max_input_tokens, 2048);
  EXPECT_EQ(matrix.row("code").max_output_tokens, 256);  // the rest of the default row stays
  EXPECT_EQ(matrix.row("faq").edge, EdgeAllowance::yes);
  EXPECT_EQ(matrix.row("faq").max_output_tokens, 64);
  bool unknown = true;
  EXPECT_EQ(matrix.row("translation", &unknown).edge, EdgeAllowance::no);
  EXPECT_FALSE(unknown);
  EXPECT_EQ(matrix.row("reasoning").edge, EdgeAllowance::no);  // untouched default rows stay
}

struct BadInput {
  std::string name;
  std::string yaml;
  std::vector<std::string> parts;  // each must appear in the message
};

TEST(RouterPolicyTest, BadInputsNameFileFieldAndReason) {
  const std::vector<BadInput> cases = {
      {"unknown top-level field", "pii: {}\nsensitve: []\n", {"sensitve", "unknown field"}},
      {"unknown nested field",
       "confidence: {default_bnad: {high: 1}}\n",
       {"confidence.default_bnad", "unknown field"}},
      {"bad regex",
       "pii:\n  patterns:\n    - {name: ssn, regex: '([0-9'}\n",
       {"patterns[0]", "ssn", "missing"}},
      {"regex that matches nothing at all",
       "pii:\n  patterns:\n    - {name: any, regex: 'x*'}\n",
       {"patterns[0]", "empty string"}},
      {"sensitive target moon",
       "sensitive:\n  - {name: space, keywords: [rocket], target: moon}\n",
       {"sensitive[0]", "target", "moon"}},
      {"sensitive rule without keywords",
       "sensitive:\n  - {name: empty, target: human}\n",
       {"sensitive[0]", "keywords"}},
      {"capability edge maybe",
       "capabilities:\n  faq: {edge: maybe}\n",
       {"capabilities.faq.edge", "maybe", "yes, no or partial"}},
      {"capability cap not positive",
       "capabilities:\n  faq: {max_input_tokens: 0}\n",
       {"capabilities.faq.max_input_tokens"}},
      {"band high below low",
       "confidence:\n  default_band: {high: 0.3, low: 0.6}\n",
       {"confidence.default_band", "low <= high"}},
      {"band above 1.01",
       "confidence:\n  default_band: {high: 2, low: 0.6}\n",
       {"confidence.default_band"}},
      {"band not a number",
       "confidence:\n  default_band: {high: lots}\n",
       {"confidence.default_band.high", "must be a number"}},
      {"route not a pool",
       "confidence: {middle_band_route: edge}\n",
       {"confidence.middle_band_route", "edge"}},
      {"complexity 9", "complexity: {cloud_large_at: 9}\n", {"complexity.cloud_large_at", "1..6"}},
      {"complexity 0", "complexity: {cloud_large_at: 0}\n", {"complexity.cloud_large_at"}},
      {"latency tokens per second 0",
       "latency: {edge_llm_tokens_per_s: 0}\n",
       {"latency.edge_llm_tokens_per_s", "> 0"}},
      {"unknown pool prior",
       "latency:\n  cloud_p90_prior_ms: {cloud-medium: 10}\n",
       {"latency.cloud_p90_prior_ms.cloud-medium", "unknown field"}},
      {"negative prior",
       "latency:\n  cloud_p90_prior_ms: {cloud-small: -1}\n",
       {"latency.cloud_p90_prior_ms.cloud-small", "> 0"}},
      {"session window 0", "sessions: {window: 0}\n", {"sessions.window", "> 0"}},
      {"sessions.enabled not a boolean",
       "sessions: {enabled: perhaps}\n",
       {"sessions.enabled", "boolean"}},
      {"root is a list", "- pii\n", {"<root>", "mapping"}},
      {"sensitive is a map", "sensitive: {name: x}\n", {"sensitive", "list"}},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string message = error_of(c.yaml);
    EXPECT_THAT(message, StartsWith(std::string(kSource) + ": "));
    for (const std::string& part : c.parts) EXPECT_THAT(message, HasSubstr(part));
  }
}

TEST(RouterPolicyTest, YamlSyntaxErrorNamesTheLine) {
  const std::string message = error_of(
      "complexity:\n"
      "  cloud_large_at: 4\n"
      "sensitive: [unclosed\n"
      "sessions: {}\n");
  EXPECT_THAT(message, StartsWith(std::string(kSource) + ": line "));
  // yaml-cpp reports where it gave up: at or after the unclosed list on line 3.
  const int line = std::stoi(message.substr(std::string(kSource).size() + 7));
  EXPECT_GE(line, 3) << message;
  EXPECT_LE(line, 5) << message;

  EXPECT_THAT(error_of("pii:\n\tenabled: true\n"), HasSubstr("line 2"));
}

TEST(RouterPolicyTest, VersionFollowsTheText) {
  const auto first = parse("complexity: {cloud_large_at: 4}\n");
  const auto same = parse("complexity: {cloud_large_at: 4}\n");
  const auto changed = parse("complexity: {cloud_large_at: 5}\n");
  const auto reformatted = parse("complexity:\n  cloud_large_at: 4\n");
  ASSERT_TRUE(first && same && changed && reformatted);
  EXPECT_EQ(first->version, same->version);
  EXPECT_NE(first->version, changed->version);
  EXPECT_NE(first->version, reformatted->version);  // a content hash, not a semantic one
  EXPECT_NE(first->version, parse("")->version);
}

class RouterPolicyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hengshi_router_policy_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(RouterPolicyFileTest, MissingThresholdsFileIsNamed) {
  const std::string missing = (dir_ / "no-such-thresholds.json").string();
  auto policy = parse_router_policy("", kSource, missing);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.error().code, "config_unreadable");
  EXPECT_THAT(policy.error().message, HasSubstr(missing));
}

TEST_F(RouterPolicyFileTest, BadThresholdsFileIsNamedWithItsField) {
  const std::string path = write("thresholds.json", R"({"format": "hengshi-thresholds",
    "format_version": 1, "version": "thr-x", "model_version": "m", "target_precision": 0.97,
    "default_band": {"high": 0.2, "low": 0.9}})");
  auto policy = parse_router_policy("", kSource, path);
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.error().code, "config_invalid");
  EXPECT_THAT(policy.error().message, AllOf(HasSubstr(path), HasSubstr("default_band")));
}

TEST_F(RouterPolicyFileTest, ThresholdsFileSetsTheBandsAndTheVersion) {
  ThresholdsFile file;
  file.version = "thr-policy-test";
  file.default_band = Band{0.95, 0.4};
  file.intents = {{"refund", Band{0.7, 0.1}}};
  const std::string path = (dir_ / "thresholds.json").string();
  ASSERT_TRUE(write_thresholds_file(file, path).ok());
  // The file wins over the policy's own default band.
  const auto policy = parse("confidence: {default_band: {high: 0.5, low: 0.2}}\n", path);
  ASSERT_NE(policy, nullptr);
  EXPECT_THAT(policy->version, HasSubstr("+thr-policy-test"));
  EXPECT_EQ(policy->thresholds.band("faq", "refund").high, 0.7);
  EXPECT_EQ(policy->thresholds.band("faq", "hours").high, 0.95);

  file.version = "thr-policy-test-2";
  ASSERT_TRUE(write_thresholds_file(file, path).ok());
  const auto next = parse("confidence: {default_band: {high: 0.5, low: 0.2}}\n", path);
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next->version, policy->version);
}

TEST_F(RouterPolicyFileTest, LoadReadsTheFileAndNamesItInErrors) {
  const std::string good = write("good.yaml", "complexity: {cloud_large_at: 5}\n");
  auto policy = load_router_policy(good, "");
  ASSERT_TRUE(policy.ok()) << policy.error().message;
  EXPECT_EQ((*policy)->source, good);
  EXPECT_EQ((*policy)->complexity_cloud_large_at, 5);
  EXPECT_EQ((*policy)->version, parse("complexity: {cloud_large_at: 5}\n")->version);

  const std::string bad = write("bad.yaml", "complexity: {cloud_large_at: 9}\n");
  auto rejected = load_router_policy(bad, "");
  ASSERT_FALSE(rejected.ok());
  EXPECT_THAT(rejected.error().message, StartsWith(bad + ": complexity.cloud_large_at: "));

  const std::string missing = (dir_ / "missing.yaml").string();
  auto unreadable = load_router_policy(missing, "");
  ASSERT_FALSE(unreadable.ok());
  EXPECT_EQ(unreadable.error().code, "config_unreadable");
  EXPECT_THAT(unreadable.error().message, HasSubstr(missing));
}

}  // namespace
}  // namespace hengshi::router
