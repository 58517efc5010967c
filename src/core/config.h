// Config: every setting of the gateway, each with an embedded default so `hengshi serve`
// runs with no file. load_config() reads a YAML file over the defaults and validates it;
// an error names the file, the field and the reason. Secrets are never in the file: an upstream
// names the environment variable that holds its API key (api_key_env).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cache_config.h"
#include "core/chain_config.h"
#include "core/result.h"

namespace hengshi {

struct ServerConfig {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  int threads = 0;                        // I/O threads; 0 = hardware concurrency
  std::int64_t max_body_bytes = 1 << 20;  // larger bodies get 413
  std::int64_t idle_timeout_ms = 60'000;  // keep-alive connection with no request is closed
  std::int64_t read_timeout_ms = 30'000;  // one request's headers + body must arrive within this
  std::int64_t write_timeout_ms = 30'000;  // one write to a client; a client that stops reading
                                          // longer is dropped and its upstream work cancelled
  std::int64_t default_deadline_ms = 60'000;  // request budget when the caller sets none
  // SIGTERM: in-flight requests get this long. Longer than default_deadline_ms, so a request
  // running on the default budget is never cut by a routine restart.
  std::int64_t drain_timeout_ms = 65'000;
  int max_connections = 10'000;        // open client connections; more are closed at accept
  int max_connections_per_ip = 1'000;  // from one peer address
  int max_in_flight = 1'024;           // requests being handled; more get a fast 429 ...
  // ... except requests the gateway answers without a cloud call (the edge intent engine, a
  // hand-off or safe reply), which may use this many more: under pressure they keep priority.
  int edge_priority_reserve = 256;
  // Client keys (src/server/key_store.h): auto = on when keys_file is set; off is allowed only
  // while `listen` is loopback; a non-loopback listener without keys refuses to start.
  std::string auth = "auto";                  // auto | on | off
  std::string keys_file;                      // YAML of hashed keys; hot-reloads (watch_interval_ms)
  // /metrics and /admin/* live on their own listener; "" = none, port 0 picks a free one.
  std::string admin_listen = "127.0.0.1:8081";
  std::string admin_token_env;                // env var holding the admin bearer token; "" = none
  // Host headers (port ignored) the admin listener answers; an Origin must name one of them.
  std::vector<std::string> admin_allowed_hosts = {"127.0.0.1", "localhost", "[::1]"};

  // Routing figures (thresholds, bands) in the response metadata; off = only in the request log
  // and the admin view.
  bool expose_figures = false;

  // Whether requests need a client key (auth resolved against keys_file).
  bool auth_enabled() const { return auth == "on" || (auth == "auto" && !keys_file.empty()); }
};

// True when HOST:PORT binds only the loopback interface (127.0.0.0/8, ::1, localhost).
bool is_loopback_listen(const std::string& listen);

struct UpstreamConfig {
  std::string name;              // required, unique within its pool (metrics, logs, metadata)
  std::string base_url;          // e.g. https://api.example.com/v1 (http or https)
  // http:// to a host other than loopback sends the key and the prompts in clear text: allowed
  // only when set.
  bool allow_plaintext = false;
  std::string model;             // model name sent upstream
  std::string api_key_env;       // environment variable holding the key; empty = no auth header
  double price_input_per_1k = 0;   // currency units per 1k prompt tokens
  double price_output_per_1k = 0;  // per 1k completion tokens
  std::int64_t connect_timeout_ms = 2'000;
  std::int64_t ttft_timeout_ms = 10'000;    // until the first byte of the response body
  std::int64_t total_timeout_ms = 60'000;   // the whole upstream exchange
  int max_concurrent = 256;                 // in-flight requests to this member
  bool tls_verify = true;                   // verify the server certificate (https only)
  std::string ca_file;                      // extra CA bundle (PEM) to trust, e.g. a private CA
  std::int64_t max_response_bytes = 8 << 20;  // a non-stream body (or an error body), bytes
  std::int64_t max_stream_bytes = 64 << 20;   // everything one streamed response may send, bytes
};

struct PoolConfig {
  std::string name;                  // cloud-small | cloud-large
  std::string balancer = "p2c";      // p2c (power of two choices on latency) | least_outstanding
  std::vector<UpstreamConfig> members;
};

struct RoutingConfig {
  std::string default_pool = "cloud-small";  // when no edge model can judge the request
  // The router's policy (src/router/router_policy.h): YAML with PII patterns, sensitive signals,
  // capability matrix, latency and session settings; "" = the embedded policy.
  std::string policy_file;
  // Confidence bands from `hengshi calibrate`; "" = the policy's default band.
  std::string thresholds_file;
  // A complexity model directory from `hengshi train-complexity` (usually beside the intent
  // model, e.g. models/complexity): it picks cloud-large vs cloud-small for requests the edge
  // does not answer. "" = the hand-written score (complexity.cloud_large_at). A configured model
  // that cannot load stops the start; a reload keeps the running one.
  std::string complexity_model;
  // The three are checked for changes this often and reloaded (0 = only on SIGHUP and
  // POST /admin/reload).
  std::int64_t watch_interval_ms = 1000;
};

// The edge engines (src/edge/). Paths are relative to the working directory. Either may be off
// (""): a request pinned to an engine that is off gets 503 edge_unavailable. An engine that is
// configured but cannot load leaves the gateway cloud-only, or stops it with edge.required.
// A LoRA adapter directory written by `hengshi finetune --output lora`, applied to the requests
// of one task type.
struct EdgeAdapterConfig {
  std::string dir;
  double scale = 1.0;  // 0 = off; 1 = as trained
};

// The regression gate a promotion runs (POST /admin/edge/promote, `hengshi edge promote`): the
// candidate must answer this set no worse than the serving version.
struct EdgeGateConfig {
  std::string data;               // regression rows (as `hengshi finetune` reads them); "" = each
                                  // promotion names its own, else it is refused
  double f1_tolerance = 0.02;     // how much lower the candidate's answer F1 may be
  double speed_tolerance = 0.25;  // how much slower (share) it may generate
  double agreement_tolerance = 0.05;  // how much less often its answer may match the intent
  double refusal_tolerance = 0.05;    // how much less often it may refuse out-of-scope rows
  // The refusal text for out-of-scope (__oos__) rows when the set gives none ("" = refusals are
  // not measured).
  std::string refusal;
  int max_rows = 0;               // score at most this many rows (0 = all)
};

struct EdgeLlmConfig {
  std::string model_path;         // a GGUF file; "" = no edge LLM
  // task type → adapter: `adapters: {faq: DIR}` or `{faq: {dir: DIR, scale: 0.8}}`. Each is
  // checked against its manifest (files, and the base model it was trained on) at load.
  std::map<std::string, EdgeAdapterConfig> adapters;
  // true: each adapter is folded into its own copy of the base at load and runs at the base's
  // speed, for one copy of the base's memory per adapter. false: llama.cpp applies the adapter at
  // every token (no extra memory; 17-41% fewer tokens/s at Qwen2-0.5B's width, bench/edge_finetune).
  bool merge_adapters = true;
  int threads = 1;                // compute threads per generation (1 is best on small boxes)
  int context_tokens = 2048;      // per worker (prompt + answer)
  int max_tokens = 256;           // answer length when a request sets none
  int workers = 1;                // concurrent generations
  int max_queue = 64;             // waiting generations; more get 429 edge_llm_busy
  int summary_turns = 3;          // only the last turns go to the edge model (latency)
  int summary_chars = 200;        // earlier turns are cut to this many characters
  // The promotion history (JSON lines): every promotion and rollback, and the live slot's
  // memory — a restart serves what was last promoted, over model_path and adapters. "" = no
  // history, and promotion and rollback are refused.
  std::string history;
  // true: the version a promotion replaces stays loaded, so a rollback is a pointer swap (under a
  // second); false: it is freed, one version in memory instead of two (with merged adapters, a
  // copy of the base per adapter each), and a rollback loads it again.
  bool keep_previous = true;
  EdgeGateConfig gate;
  // How often the serving directories (each adapter's, a promoted full model's) are checked for a
  // new version written into them; one is promoted like `hengshi edge promote` (gate included, by
  // "watch"). Needs history and gate.data. 0 = not watched.
  std::int64_t watch_interval_ms = 1000;
};

struct EdgeConfig {
  std::string intent_model;       // a model directory written by `hengshi train`; "" = off
  // A configured engine that cannot load: false = start without the edge and send everything to
  // the cloud (logged, counted, in /readyz); true = refuse to start.
  bool required = false;
  EdgeLlmConfig llm;
};

struct LogConfig {
  // One JSON line per request (DESIGN.md §4): "-" = stdout, a path = append to that file,
  // "" = off (benchmarks).
  std::string requests = "-";
  // Rotation of a file target (never of stdout): the file is renamed to FILE.1 (FILE.1 to FILE.2,
  // ...) when the next line would take it over rotate_bytes, or rotate_age_s after it was
  // opened; `keep` rotated files are kept, older ones deleted. 0 = no rotation by that measure.
  std::int64_t rotate_bytes = 0;
  std::int64_t rotate_age_s = 0;
  int keep = 5;
  // The last user turn and the answer's text in each line ("text": {"prompt", "answer"}): what
  // `hengshi replay` and `hengshi flywheel export` read. Never for a request the PII detector
  // flagged (its text may not leave the edge, nor reach a log). Off by default.
  bool text = false;
};

// Settings shared by every pool.
struct CloudConfig {
  // Upstream response bytes all calls together may hold in memory (src/cloud/response_budget.h);
  // a call that would go over fails fast with 503 pool_overloaded.
  std::int64_t max_in_flight_response_bytes = std::int64_t{256} << 20;
};

struct Config {
  std::string source = "<embedded defaults>";  // file the config came from, for messages
  ServerConfig server;
  CloudConfig cloud;
  LogConfig log;
  RoutingConfig routing;
  EdgeConfig edge;
  ChainConfig chain;
  CacheConfig cache;
  std::vector<PoolConfig> pools;

  const PoolConfig* find_pool(const std::string& name) const;
};

// The embedded defaults: both pools point at a local hengshi-sim on 127.0.0.1:9101.
Config default_config();

// Reads YAML from a file on top of default_config() and validates the result.
Result<Config> load_config_file(const std::string& path);
// Same, from text (source names the origin in messages).
Result<Config> load_config_text(const std::string& yaml_text, const std::string& source);
// Checks cross-field rules (unique names, known pools, positive timeouts, parseable URLs).
Status validate_config(const Config& config);

}  // namespace hengshi
