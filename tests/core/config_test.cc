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
      - name: b
        base_url: https://example.test/v1
        model: small-b
  cloud-large:
    members:
      - name: c
        base_url: http://127.0.0.1:1235
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
  EXPECT_EQ(small->members[1].name, "b");
  EXPECT_FALSE(small->members[0].allow_plaintext);
  EXPECT_EQ(small->members[0].max_response_bytes, 8 << 20);
  EXPECT_EQ(small->members[0].max_stream_bytes, 64 << 20);
  EXPECT_FALSE(config->server.expose_figures);
  EXPECT_EQ(config->cloud.max_in_flight_response_bytes, std::int64_t{256} << 20);
}

TEST(ConfigTest, ReadsUpstreamBoundsExposeFiguresAndTheCloudBudget) {
  auto config = load_config_text(R"(
server: {expose_figures: true}
cloud: {max_in_flight_response_bytes: 1000000}
pools:
  cloud-small:
    members:
      - {name: lan, base_url: 'http://10.0.0.5:8000/v1', model: m, allow_plaintext: true,
         max_response_bytes: 4096, max_stream_bytes: 65536}
)", "t.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_TRUE(config->server.expose_figures);
  EXPECT_EQ(config->cloud.max_in_flight_response_bytes, 1000000);
  const UpstreamConfig& lan = config->find_pool("cloud-small")->members.at(0);
  EXPECT_TRUE(lan.allow_plaintext);
  EXPECT_EQ(lan.max_response_bytes, 4096);
  EXPECT_EQ(lan.max_stream_bytes, 65536);
}

TEST(ConfigTest, PlainHttpToLoopbackNeedsNoOptIn) {
  for (const char* url : {"http://127.0.0.1:9/v1", "http://127.8.9.10/v1", "http://localhost:9",
                          "http://[::1]:9/v1"}) {
    auto config = load_config_text(
        std::string("pools: {cloud-small: {members: [{name: a, model: m, base_url: '") + url +
            "'}]}}",
        "t.yaml");
    EXPECT_TRUE(config.ok()) << url << ": " << config.error().message;
  }
}

struct BadCase {
  const char* yaml;
  const char* expected_fragment;
};

TEST(ConfigTest, TheChainSectionIsReadOverItsDefaults) {
  auto config = load_config_text(R"yaml(
chain:
  shares: {edge: 0.6, last_resort_ms: 80}
  task_shares: {faq: {edge: 0.9}}
  retry: {backoff_ms: [100, 300]}
  breaker: {min_calls: 5, open_ms: 1000, max_open_ms: 8000, consecutive_failures: 7,
            consecutive_outage_failures: 0, outlier_margin: 0.3, panic_threshold: 0.34}
  bulkheads: {cloud-large: {max_concurrent: 8, max_queue: 0}}
  commit: {tokens: 4, first_sentence: false, mode: always, task_modes: {voice: never}}
  offline: {consecutive_failures: 5, notice: " (offline)"}
  shadow: {sample_rate: 0.1, task_types: [faq]}
  last_resort: {kind: human}
edge: {required: true}
)yaml", "chain.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const ChainConfig& chain = config->chain;
  EXPECT_DOUBLE_EQ(chain.shares.edge, 0.6);
  EXPECT_DOUBLE_EQ(chain.shares.cloud_small, 0.5) << "unset shares keep their defaults";
  EXPECT_EQ(chain.shares.last_resort_ms, 80);
  EXPECT_DOUBLE_EQ(chain.shares_for("faq").edge, 0.9);
  EXPECT_EQ(chain.shares_for("faq").last_resort_ms, 80) << "a task type inherits the chain's shares";
  EXPECT_DOUBLE_EQ(chain.shares_for("other").edge, 0.6);
  EXPECT_EQ(chain.retry.backoff_ms, (std::vector<std::int64_t>{100, 300}));
  EXPECT_EQ(chain.breaker.min_calls, 5);
  EXPECT_EQ(chain.breaker.open_ms, 1000);
  EXPECT_EQ(chain.breaker.max_open_ms, 8000);
  EXPECT_EQ(chain.breaker.consecutive_failures, 7);
  EXPECT_EQ(chain.breaker.consecutive_outage_failures, 0);
  EXPECT_DOUBLE_EQ(chain.breaker.outlier_margin, 0.3);
  EXPECT_DOUBLE_EQ(chain.breaker.panic_threshold, 0.34);
  EXPECT_DOUBLE_EQ(chain.breaker.failure_ratio, 0.5) << "unset: the default";
  EXPECT_EQ(chain.bulkhead_for("cloud-large").max_concurrent, 8);
  EXPECT_EQ(chain.bulkhead_for("cloud-small").max_concurrent, BulkheadConfig{}.max_concurrent);
  EXPECT_EQ(chain.commit.tokens, 4);
  EXPECT_EQ(chain.commit.mode_for("faq"), CommitMode::always);
  EXPECT_EQ(chain.commit.mode_for("voice"), CommitMode::never);
  EXPECT_EQ(chain.offline.consecutive_failures, 5);
  EXPECT_EQ(chain.shadow.task_types, (std::vector<std::string>{"faq"}));
  EXPECT_EQ(chain.last_resort.kind, "human");
  EXPECT_TRUE(config->edge.required);
}

TEST(ConfigTest, TheCacheSectionIsReadOverItsDefaults) {
  auto config = load_config_text(R"yaml(
cache:
  threshold: 0.85
  ttl_s: 600
  task_types: {news: {ttl_s: 60, threshold: 0.95}, chat: {enabled: false}}
  hot: {max_entries: 100, max_bytes: 1048576}
  redis: {host: 127.0.0.1, port: 6380, fleet_size: 3}
)yaml", "cache.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const CacheConfig& cache = config->cache;
  EXPECT_TRUE(cache.enabled);
  EXPECT_EQ(cache.embedder, "ngram");
  EXPECT_DOUBLE_EQ(cache.threshold_for("faq"), 0.85);
  EXPECT_DOUBLE_EQ(cache.threshold_for("news"), 0.95);
  EXPECT_EQ(cache.ttl_for("news"), 60);
  EXPECT_EQ(cache.ttl_for("faq"), 600);
  EXPECT_FALSE(cache.enabled_for("chat"));
  EXPECT_EQ(cache.hot.max_entries, 100);
  EXPECT_EQ(cache.cold.max_entries, CacheConfig{}.cold.max_entries);
  EXPECT_EQ(cache.redis.port, 6380);
  EXPECT_EQ(cache.redis.fleet_size, 3);
}

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
        BadCase{"chain: {breaker: {failure_ratio: 2}}", "chain.breaker.failure_ratio: must be in (0, 1]"},
        BadCase{"chain: {shares: {edge: 0}}", "chain.shares.edge: must be a share"},
        BadCase{"chain: {breaker: {open_ms: 5000, max_open_ms: 100}}", "chain.breaker.max_open_ms: must be >= open_ms"},
        BadCase{"chain: {breaker: {panic_threshold: 2}}", "chain.breaker.panic_threshold: must be in [0, 1]"},
        BadCase{"chain: {breaker: {consecutive_failures: -1}}", "chain.breaker.consecutive_failures: must be >= 0"},
        BadCase{"chain: {commit: {mode: sometimes}}", "chain.commit.mode: must be adaptive, always or never"},
        BadCase{"cache: {embedder: bert}", "cache.embedder: must be ngram, fasttext or llama"},
        BadCase{"cache: {embedder: llama}", "cache.embedding_model: is required"},
        BadCase{"cache: {threshold: 1.5}", "cache.threshold: must be a cosine in (0, 1]"},
        BadCase{"cache: {hot: {max_entries: 0}}", "cache.hot.max_entries: must be > 0"},
        BadCase{"cache: {task_types: {news: {ttl: 5}}}", "cache.task_types.news.ttl: unknown field"},
        BadCase{"cache: {redis: {host: x, port: 70000}}", "cache.redis.port: must be in [1, 65535]"},
        BadCase{"chain: {commit: {task_modes: {faq: 3}}}", "chain.commit.task_modes.faq: must be adaptive"},
        BadCase{"chain: {retry: {backoff_ms: [200, -1]}}", "chain.retry.backoff_ms[1]: must be > 0"},
        BadCase{"chain: {retry: {backof_ms: [1]}}", "chain.retry.backof_ms: unknown field"},
        BadCase{"chain: {last_resort: {kind: pray}}", "chain.last_resort.kind: must be canned, human or error"},
        BadCase{"chain: {bulkheads: {cloud-huge: {max_concurrent: 1}}}", "chain.bulkheads.cloud-huge: unknown pool"},
        BadCase{"chain: {offline: {edge_threshold: 1.5}}", "chain.offline.edge_threshold: must be in [0, 1]"},
        BadCase{"chain: {shadow: {sample_rate: -0.1}}", "chain.shadow.sample_rate: must be in [0, 1]"},
        BadCase{"server: {edge_priority_reserve: -1}", "server.edge_priority_reserve: must be >= 0"},
        BadCase{"edge: {llm: {adapters: [a, b]}}", "edge.llm.adapters"},
        BadCase{"edge: {llm: {adapters: {faq: {dir: x, scale: -1}}}}", "edge.llm.adapters.faq.scale"},
        BadCase{"edge: {llm: {adapters: {faq: {dir: x, rank: 2}}}}", "rank"},
        BadCase{"edge: {llm: {adapters: {faq: {scale: 1}}}}", "edge.llm.adapters.faq.dir"},
        BadCase{"edge: {llm: {gate: {f1_tolerance: 2}}}", "edge.llm.gate.f1_tolerance"},
        BadCase{"edge: {llm: {gate: {speed_tolerance: 1}}}", "edge.llm.gate.speed_tolerance"},
        BadCase{"edge: {llm: {gate: {max_rows: -1}}}", "edge.llm.gate.max_rows"},
        BadCase{"edge: {llm: {merge_adapters: sometimes}}", "edge.llm.merge_adapters"},
        BadCase{"edge: {llm: {watch_interval_ms: -5}}", "edge.llm.watch_interval_ms"},
        BadCase{"edge: {llm: {keep_previous: perhaps}}", "edge.llm.keep_previous"},
        BadCase{"edge: {llm: {gate: {rows: 3}}}", "rows"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'ftp://x', model: m}]}}",
                "pools.cloud-small.members[0].base_url"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'http://127.0.0.1'}]}}",
                "pools.cloud-small.members[0].model: is required"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'http://127.0.0.1', model: m, api_key: sk-1}]}}",
                "api_key_env"},
        BadCase{"pools: {cloud-medium: {members: [{name: a, base_url: 'http://127.0.0.1', model: m}]}}",
                "pools.cloud-medium: unknown pool"},
        BadCase{"pools: {cloud-small: {balancer: random, members: [{name: a, base_url: 'http://127.0.0.1', model: m}]}}",
                "balancer"},
        BadCase{"pools: {cloud-small: {members: []}}", "members: must not be empty"},
        BadCase{"pools: {cloud-large: {members: [{name: a, base_url: 'http://127.0.0.1', model: m}]}}",
                "routing.default_pool"},
        BadCase{"server: [1, 2", "line"},
        BadCase{"pools: {cloud-small: {members: [{base_url: 'https://x', model: m}]}}",
                "pools.cloud-small.members[0].name: is required"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'http://api.example.com/v1', "
                "model: m}]}}",
                "pools.cloud-small.members[0].allow_plaintext"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'http://10.1.2.3', model: m}]}}",
                "allow_plaintext: true"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'http://127.0.0.1', model: m, "
                "max_stream_bytes: 0}]}}",
                "members[0].max_stream_bytes: must be > 0"},
        BadCase{"pools: {cloud-small: {members: [{name: a, base_url: 'http://127.0.0.1', model: m, "
                "max_response_bytes: -5}]}}",
                "members[0].max_response_bytes: must be > 0"},
        BadCase{"cloud: {max_in_flight_response_bytes: 0}", "cloud.max_in_flight_response_bytes"},
        BadCase{"cloud: {budget: 1}", "cloud.budget: unknown field"},
        BadCase{"server: {expose_figures: maybe}", "server.expose_figures"}));

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

TEST(ConfigEdgeAdaptersTest, TaskTypesMapToAdapterDirectories) {  // bad values: ConfigRejectTest
  auto config = load_config_text(R"(
edge:
  llm:
    model_path: base.gguf
    adapters:
      faq: models/faq-lora
      billing: {dir: models/billing-lora, scale: 0.5}
    merge_adapters: false
    watch_interval_ms: 250
    keep_previous: false
)", "adapters.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_FALSE(config->edge.llm.merge_adapters);
  EXPECT_EQ(config->edge.llm.watch_interval_ms, 250);
  EXPECT_EQ(default_config().edge.llm.watch_interval_ms, 1000);
  EXPECT_FALSE(config->edge.llm.keep_previous);
  EXPECT_TRUE(default_config().edge.llm.keep_previous) << "a rollback is a pointer swap by default";
  EXPECT_TRUE(default_config().edge.llm.merge_adapters) << "merged: adapters at the base's speed";
  const auto& adapters = config->edge.llm.adapters;
  ASSERT_EQ(adapters.size(), 2u);
  EXPECT_EQ(adapters.at("faq").dir, "models/faq-lora");
  EXPECT_DOUBLE_EQ(adapters.at("faq").scale, 1.0);
  EXPECT_EQ(adapters.at("billing").dir, "models/billing-lora");
  EXPECT_DOUBLE_EQ(adapters.at("billing").scale, 0.5);
}

TEST(ConfigEdgeAdaptersTest, HistoryAndGateAreReadAndChecked) {
  auto config = load_config_text(R"(
edge:
  llm:
    model_path: base.gguf
    history: var/edge-history.jsonl
    gate: {data: regression.jsonl, f1_tolerance: 0.05, speed_tolerance: 0.5, max_rows: 40}
)", "lifecycle.yaml");
  ASSERT_TRUE(config.ok()) << config.error().message;
  const auto& llm = config->edge.llm;
  EXPECT_EQ(llm.history, "var/edge-history.jsonl");
  EXPECT_EQ(llm.gate.data, "regression.jsonl");
  EXPECT_DOUBLE_EQ(llm.gate.f1_tolerance, 0.05);
  EXPECT_DOUBLE_EQ(llm.gate.speed_tolerance, 0.5);
  EXPECT_EQ(llm.gate.max_rows, 40);
  EXPECT_DOUBLE_EQ(default_config().edge.llm.gate.f1_tolerance, 0.02);
}

}  // namespace
}  // namespace hengshi
