#include "core/config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/cache_config_yaml.h"
#include "core/chat_request.h"
#include "core/url.h"
#include "core/yaml_fields.h"

namespace hengshi {
namespace {

using yaml_fields::FieldError;
using yaml_fields::join;
using yaml_fields::positive;
using yaml_fields::read;
using yaml_fields::reject_unknown;

UpstreamConfig parse_upstream(const YAML::Node& node, const std::string& path) {
  reject_unknown(node, path,
                 {"name", "base_url", "model", "api_key_env", "price_input_per_1k",
                  "price_output_per_1k", "connect_timeout_ms", "ttft_timeout_ms",
                  "total_timeout_ms", "max_concurrent", "tls_verify", "ca_file", "api_key",
                  "allow_plaintext", "max_response_bytes", "max_stream_bytes"});
  if (node["api_key"]) {
    throw FieldError{join(path, "api_key"),
                     "secrets are not read from the config file; put the key in an environment "
                     "variable and name it in api_key_env"};
  }
  UpstreamConfig up;
  read(node, path, "name", up.name);
  read(node, path, "base_url", up.base_url);
  read(node, path, "model", up.model);
  read(node, path, "api_key_env", up.api_key_env);
  read(node, path, "price_input_per_1k", up.price_input_per_1k);
  read(node, path, "price_output_per_1k", up.price_output_per_1k);
  read(node, path, "connect_timeout_ms", up.connect_timeout_ms);
  read(node, path, "ttft_timeout_ms", up.ttft_timeout_ms);
  read(node, path, "total_timeout_ms", up.total_timeout_ms);
  read(node, path, "max_concurrent", up.max_concurrent);
  read(node, path, "tls_verify", up.tls_verify);
  read(node, path, "ca_file", up.ca_file);
  read(node, path, "allow_plaintext", up.allow_plaintext);
  read(node, path, "max_response_bytes", up.max_response_bytes);
  read(node, path, "max_stream_bytes", up.max_stream_bytes);
  // A name, not the URL: it shows in metrics, logs and response metadata.
  if (up.name.empty()) throw FieldError{join(path, "name"), "is required"};
  if (up.base_url.empty()) throw FieldError{join(path, "base_url"), "is required"};
  if (up.model.empty()) throw FieldError{join(path, "model"), "is required"};
  return up;
}

PoolConfig parse_pool(const std::string& name, const YAML::Node& node, const std::string& path) {
  reject_unknown(node, path, {"balancer", "members"});
  PoolConfig pool;
  pool.name = name;
  read(node, path, "balancer", pool.balancer);
  const YAML::Node members = node["members"];
  if (!members || !members.IsSequence()) {
    throw FieldError{join(path, "members"), "is required and must be a list of upstreams"};
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    pool.members.push_back(
        parse_upstream(members[i], join(path, "members") + "[" + std::to_string(i) + "]"));
  }
  return pool;
}

LevelShares parse_shares(const YAML::Node& node, const std::string& path, LevelShares shares) {
  reject_unknown(node, path, {"edge", "edge_degraded", "cloud_small", "cloud_large", "last_resort_ms"});
  read(node, path, "edge", shares.edge);
  read(node, path, "edge_degraded", shares.edge_degraded);
  read(node, path, "cloud_small", shares.cloud_small);
  read(node, path, "cloud_large", shares.cloud_large);
  read(node, path, "last_resort_ms", shares.last_resort_ms);
  return shares;
}

CommitMode read_commit_mode(const YAML::Node& node, const std::string& path, CommitMode fallback) {
  if (!node) return fallback;
  std::string name;
  try {
    name = node.as<std::string>();
  } catch (const YAML::Exception&) {
    throw FieldError{path, "must be adaptive, always or never"};
  }
  auto mode = commit_mode_from_string(name);
  if (!mode) throw FieldError{path, "must be adaptive, always or never (got '" + name + "')"};
  return *mode;
}

void parse_chain(const YAML::Node& chain, ChainConfig& c) {
  reject_unknown(chain, "chain",
                 {"shares", "task_shares", "retry", "breaker", "bulkheads", "commit", "offline", "shadow",
                  "last_resort"});
  if (const YAML::Node shares = chain["shares"]) c.shares = parse_shares(shares, "chain.shares", c.shares);
  if (const YAML::Node tasks = chain["task_shares"]) {
    if (!tasks.IsMap()) throw FieldError{"chain.task_shares", "must be a mapping of task type → shares"};
    for (const auto& item : tasks) {
      auto name = item.first.as<std::string>();
      c.task_shares[name] = parse_shares(item.second, "chain.task_shares." + name, c.shares);
    }
  }
  if (const YAML::Node retry = chain["retry"]) {
    reject_unknown(retry, "chain.retry", {"enabled", "backoff_ms"});
    read(retry, "chain.retry", "enabled", c.retry.enabled);
    if (const YAML::Node backoff = retry["backoff_ms"]) {
      if (!backoff.IsSequence()) throw FieldError{"chain.retry.backoff_ms", "must be a list of milliseconds"};
      c.retry.backoff_ms.clear();
      for (std::size_t i = 0; i < backoff.size(); ++i) {
        std::int64_t ms = 0;
        try {
          ms = backoff[i].as<std::int64_t>();
        } catch (const YAML::Exception&) {
          throw FieldError{"chain.retry.backoff_ms[" + std::to_string(i) + "]", "must be an integer"};
        }
        c.retry.backoff_ms.push_back(ms);
      }
    }
  }
  if (const YAML::Node breaker = chain["breaker"]) {
    reject_unknown(breaker, "chain.breaker",
                   {"enabled", "consecutive_failures", "consecutive_outage_failures", "failure_ratio",
                    "min_calls", "outlier_margin", "window_ms", "open_ms", "max_open_ms",
                    "panic_threshold"});
    read(breaker, "chain.breaker", "enabled", c.breaker.enabled);
    read(breaker, "chain.breaker", "consecutive_failures", c.breaker.consecutive_failures);
    read(breaker, "chain.breaker", "consecutive_outage_failures", c.breaker.consecutive_outage_failures);
    read(breaker, "chain.breaker", "failure_ratio", c.breaker.failure_ratio);
    read(breaker, "chain.breaker", "min_calls", c.breaker.min_calls);
    read(breaker, "chain.breaker", "outlier_margin", c.breaker.outlier_margin);
    read(breaker, "chain.breaker", "window_ms", c.breaker.window_ms);
    read(breaker, "chain.breaker", "open_ms", c.breaker.open_ms);
    read(breaker, "chain.breaker", "max_open_ms", c.breaker.max_open_ms);
    read(breaker, "chain.breaker", "panic_threshold", c.breaker.panic_threshold);
  }
  if (const YAML::Node bulkheads = chain["bulkheads"]) {
    if (!bulkheads.IsMap()) throw FieldError{"chain.bulkheads", "must be a mapping of pool name → bulkhead"};
    for (const auto& item : bulkheads) {
      auto name = item.first.as<std::string>();
      const std::string path = "chain.bulkheads." + name;
      reject_unknown(item.second, path, {"max_concurrent", "max_queue", "max_queue_wait_ms"});
      BulkheadConfig b;
      read(item.second, path, "max_concurrent", b.max_concurrent);
      read(item.second, path, "max_queue", b.max_queue);
      read(item.second, path, "max_queue_wait_ms", b.max_queue_wait_ms);
      c.bulkheads[name] = b;
    }
  }
  if (const YAML::Node commit = chain["commit"]) {
    reject_unknown(commit, "chain.commit", {"mode", "task_modes", "tokens", "first_sentence"});
    c.commit.mode = read_commit_mode(commit["mode"], "chain.commit.mode", c.commit.mode);
    if (const YAML::Node tasks = commit["task_modes"]) {
      if (!tasks.IsMap()) throw FieldError{"chain.commit.task_modes", "must be a mapping of task type → mode"};
      for (const auto& item : tasks) {
        auto name = item.first.as<std::string>();
        c.commit.task_modes[name] = read_commit_mode(item.second, "chain.commit.task_modes." + name, c.commit.mode);
      }
    }
    read(commit, "chain.commit", "tokens", c.commit.tokens);
    read(commit, "chain.commit", "first_sentence", c.commit.first_sentence);
  }
  if (const YAML::Node offline = chain["offline"]) {
    reject_unknown(offline, "chain.offline",
                   {"enabled", "consecutive_failures", "edge_threshold", "notice", "probe_interval_ms"});
    read(offline, "chain.offline", "enabled", c.offline.enabled);
    read(offline, "chain.offline", "consecutive_failures", c.offline.consecutive_failures);
    read(offline, "chain.offline", "edge_threshold", c.offline.edge_threshold);
    read(offline, "chain.offline", "notice", c.offline.notice);
    read(offline, "chain.offline", "probe_interval_ms", c.offline.probe_interval_ms);
  }
  if (const YAML::Node shadow = chain["shadow"]) {
    reject_unknown(shadow, "chain.shadow", {"sample_rate", "task_types", "timeout_ms"});
    read(shadow, "chain.shadow", "sample_rate", c.shadow.sample_rate);
    read(shadow, "chain.shadow", "task_types", c.shadow.task_types);
    read(shadow, "chain.shadow", "timeout_ms", c.shadow.timeout_ms);
  }
  if (const YAML::Node last = chain["last_resort"]) {
    reject_unknown(last, "chain.last_resort", {"kind", "message"});
    read(last, "chain.last_resort", "kind", c.last_resort.kind);
    read(last, "chain.last_resort", "message", c.last_resort.message);
  }
}

void check_shares(const LevelShares& s, const std::string& path) {
  for (auto [value, name] : {std::pair{s.edge, "edge"}, std::pair{s.edge_degraded, "edge_degraded"},
                             std::pair{s.cloud_small, "cloud_small"}, std::pair{s.cloud_large, "cloud_large"}}) {
    if (!(value > 0.0 && value <= 1.0)) {
      throw FieldError{path + "." + name, "must be a share of the remaining budget in (0, 1]"};
    }
  }
  if (s.last_resort_ms < 0) throw FieldError{path + ".last_resort_ms", "must be >= 0"};
}

void check_chain(const ChainConfig& c) {
  check_shares(c.shares, "chain.shares");
  for (const auto& [name, shares] : c.task_shares) check_shares(shares, "chain.task_shares." + name);
  if (c.retry.backoff_ms.size() > 10) throw FieldError{"chain.retry.backoff_ms", "at most 10 retries"};
  for (std::size_t i = 0; i < c.retry.backoff_ms.size(); ++i) {
    positive(c.retry.backoff_ms[i], "chain.retry.backoff_ms[" + std::to_string(i) + "]");
  }
  if (!(c.breaker.failure_ratio > 0.0 && c.breaker.failure_ratio <= 1.0)) {
    throw FieldError{"chain.breaker.failure_ratio", "must be in (0, 1]"};
  }
  positive(c.breaker.min_calls, "chain.breaker.min_calls");
  positive(c.breaker.window_ms, "chain.breaker.window_ms");
  positive(c.breaker.open_ms, "chain.breaker.open_ms");
  if (c.breaker.consecutive_failures < 0) throw FieldError{"chain.breaker.consecutive_failures", "must be >= 0 (0 = off)"};
  if (c.breaker.consecutive_outage_failures < 0) {
    throw FieldError{"chain.breaker.consecutive_outage_failures", "must be >= 0 (0 = off)"};
  }
  if (!(c.breaker.outlier_margin >= 0.0 && c.breaker.outlier_margin <= 1.0)) {
    throw FieldError{"chain.breaker.outlier_margin", "must be in [0, 1]"};
  }
  if (c.breaker.max_open_ms < c.breaker.open_ms) throw FieldError{"chain.breaker.max_open_ms", "must be >= open_ms"};
  if (!(c.breaker.panic_threshold >= 0.0 && c.breaker.panic_threshold <= 1.0)) {
    throw FieldError{"chain.breaker.panic_threshold", "must be in [0, 1] (0 = never panic)"};
  }
  for (const auto& [name, b] : c.bulkheads) {
    if (name != "cloud-small" && name != "cloud-large") {
      throw FieldError{"chain.bulkheads." + name, "unknown pool (pools are cloud-small and cloud-large)"};
    }
    positive(b.max_concurrent, "chain.bulkheads." + name + ".max_concurrent");
    if (b.max_queue < 0) throw FieldError{"chain.bulkheads." + name + ".max_queue", "must be >= 0"};
    if (b.max_queue_wait_ms < 0) throw FieldError{"chain.bulkheads." + name + ".max_queue_wait_ms", "must be >= 0"};
  }
  if (c.commit.tokens < 0) throw FieldError{"chain.commit.tokens", "must be >= 0 (0 = commit at once)"};
  positive(c.offline.consecutive_failures, "chain.offline.consecutive_failures");
  if (!(c.offline.edge_threshold >= 0.0 && c.offline.edge_threshold <= 1.0)) {
    throw FieldError{"chain.offline.edge_threshold", "must be in [0, 1]"};
  }
  positive(c.offline.probe_interval_ms, "chain.offline.probe_interval_ms");
  if (!(c.shadow.sample_rate >= 0.0 && c.shadow.sample_rate <= 1.0)) {
    throw FieldError{"chain.shadow.sample_rate", "must be in [0, 1]"};
  }
  positive(c.shadow.timeout_ms, "chain.shadow.timeout_ms");
  const std::string& kind = c.last_resort.kind;
  if (kind != "canned" && kind != "human" && kind != "error") {
    throw FieldError{"chain.last_resort.kind", "must be canned, human or error (got '" + kind + "')"};
  }
}

void apply(const YAML::Node& root, Config& config) {
  if (!root || root.IsNull()) return;  // an empty file means all defaults
  reject_unknown(root, "", {"server", "routing", "pools", "log", "edge", "cloud", "chain", "cache"});
  if (const YAML::Node chain = root["chain"]) parse_chain(chain, config.chain);
  if (const YAML::Node cache = root["cache"]) parse_cache(cache, config.cache);
  if (const YAML::Node edge = root["edge"]) {
    reject_unknown(edge, "edge", {"intent_model", "required", "llm"});
    read(edge, "edge", "intent_model", config.edge.intent_model);
    read(edge, "edge", "required", config.edge.required);
    if (const YAML::Node llm = edge["llm"]) {
      reject_unknown(llm, "edge.llm",
                     {"model_path", "threads", "context_tokens", "max_tokens", "workers", "max_queue",
                      "summary_turns", "summary_chars", "adapters", "merge_adapters", "history", "gate",
                      "watch_interval_ms", "keep_previous"});
      EdgeLlmConfig& l = config.edge.llm;
      read(llm, "edge.llm", "model_path", l.model_path);
      read(llm, "edge.llm", "threads", l.threads);
      read(llm, "edge.llm", "context_tokens", l.context_tokens);
      read(llm, "edge.llm", "max_tokens", l.max_tokens);
      read(llm, "edge.llm", "workers", l.workers);
      read(llm, "edge.llm", "max_queue", l.max_queue);
      read(llm, "edge.llm", "summary_turns", l.summary_turns);
      read(llm, "edge.llm", "summary_chars", l.summary_chars);
      read(llm, "edge.llm", "history", l.history);
      read(llm, "edge.llm", "merge_adapters", l.merge_adapters);
      read(llm, "edge.llm", "watch_interval_ms", l.watch_interval_ms);
      read(llm, "edge.llm", "keep_previous", l.keep_previous);
      if (const YAML::Node gate = llm["gate"]) {
        reject_unknown(gate, "edge.llm.gate", {"data", "f1_tolerance", "speed_tolerance", "agreement_tolerance",
                                               "refusal_tolerance", "refusal", "max_rows"});
        read(gate, "edge.llm.gate", "data", l.gate.data);
        read(gate, "edge.llm.gate", "f1_tolerance", l.gate.f1_tolerance);
        read(gate, "edge.llm.gate", "speed_tolerance", l.gate.speed_tolerance);
        read(gate, "edge.llm.gate", "agreement_tolerance", l.gate.agreement_tolerance);
        read(gate, "edge.llm.gate", "refusal_tolerance", l.gate.refusal_tolerance);
        read(gate, "edge.llm.gate", "refusal", l.gate.refusal);
        read(gate, "edge.llm.gate", "max_rows", l.gate.max_rows);
      }
      if (const YAML::Node adapters = llm["adapters"]) {
        if (!adapters.IsMap()) {
          throw FieldError{"edge.llm.adapters", "must map task types to adapter directories"};
        }
        for (const auto& entry : adapters) {
          const std::string task = entry.first.as<std::string>();
          const std::string field = "edge.llm.adapters." + task;
          EdgeAdapterConfig adapter;
          if (entry.second.IsScalar()) {
            adapter.dir = entry.second.as<std::string>();
          } else if (entry.second.IsMap()) {
            reject_unknown(entry.second, field, {"dir", "scale"});
            read(entry.second, field, "dir", adapter.dir);
            read(entry.second, field, "scale", adapter.scale);
          } else {
            throw FieldError{field, "must be a directory or {dir, scale}"};
          }
          if (adapter.dir.empty()) throw FieldError{field + ".dir", "is empty"};
          if (!(adapter.scale >= 0.0 && adapter.scale <= 4.0)) {
            throw FieldError{field + ".scale", "must be in [0, 4]"};
          }
          l.adapters[task] = adapter;
        }
      }
    }
  }
  if (const YAML::Node log = root["log"]) {
    reject_unknown(log, "log", {"requests", "rotate_bytes", "rotate_age_s", "keep", "text"});
    read(log, "log", "requests", config.log.requests);
    read(log, "log", "rotate_bytes", config.log.rotate_bytes);
    read(log, "log", "rotate_age_s", config.log.rotate_age_s);
    read(log, "log", "keep", config.log.keep);
    read(log, "log", "text", config.log.text);
  }
  if (const YAML::Node server = root["server"]) {
    reject_unknown(server, "server",
                   {"listen", "threads", "max_body_bytes", "idle_timeout_ms", "read_timeout_ms",
                    "default_deadline_ms", "drain_timeout_ms", "write_timeout_ms", "max_connections",
                    "max_connections_per_ip", "max_in_flight", "edge_priority_reserve", "auth", "keys_file", "admin_listen",
                    "admin_token_env", "admin_allowed_hosts", "expose_figures"});
    ServerConfig& s = config.server;
    read(server, "server", "listen", s.listen);
    read(server, "server", "threads", s.threads);
    read(server, "server", "max_body_bytes", s.max_body_bytes);
    read(server, "server", "idle_timeout_ms", s.idle_timeout_ms);
    read(server, "server", "read_timeout_ms", s.read_timeout_ms);
    read(server, "server", "default_deadline_ms", s.default_deadline_ms);
    read(server, "server", "drain_timeout_ms", s.drain_timeout_ms);
    read(server, "server", "write_timeout_ms", s.write_timeout_ms);
    read(server, "server", "max_connections", s.max_connections);
    read(server, "server", "max_connections_per_ip", s.max_connections_per_ip);
    read(server, "server", "max_in_flight", s.max_in_flight);
    read(server, "server", "edge_priority_reserve", s.edge_priority_reserve);
    read(server, "server", "auth", s.auth);
    read(server, "server", "keys_file", s.keys_file);
    read(server, "server", "admin_listen", s.admin_listen);
    read(server, "server", "admin_token_env", s.admin_token_env);
    read(server, "server", "admin_allowed_hosts", s.admin_allowed_hosts);
    read(server, "server", "expose_figures", s.expose_figures);
  }
  if (const YAML::Node cloud = root["cloud"]) {
    reject_unknown(cloud, "cloud", {"max_in_flight_response_bytes"});
    read(cloud, "cloud", "max_in_flight_response_bytes", config.cloud.max_in_flight_response_bytes);
  }
  if (const YAML::Node routing = root["routing"]) {
    reject_unknown(routing, "routing",
                   {"default_pool", "policy_file", "thresholds_file", "complexity_model",
                    "watch_interval_ms"});
    read(routing, "routing", "default_pool", config.routing.default_pool);
    read(routing, "routing", "policy_file", config.routing.policy_file);
    read(routing, "routing", "thresholds_file", config.routing.thresholds_file);
    read(routing, "routing", "complexity_model", config.routing.complexity_model);
    read(routing, "routing", "watch_interval_ms", config.routing.watch_interval_ms);
  }
  if (const YAML::Node pools = root["pools"]) {
    if (!pools.IsMap()) throw FieldError{"pools", "must be a mapping of pool name → pool"};
    config.pools.clear();  // a file that names pools replaces the embedded ones
    for (const auto& item : pools) {
      auto name = item.first.as<std::string>();
      config.pools.push_back(parse_pool(name, item.second, "pools." + name));
    }
  }
}

// Who may use the gateway: a listener other networks can reach needs client keys, and the admin
// listener off loopback needs its token. Error.code carries the field, message the reason.
Status check_auth(const ServerConfig& s) {
  if (s.auth != "auto" && s.auth != "on" && s.auth != "off") {
    return Error{"server.auth", "must be auto, on or off (got '" + s.auth + "')"};
  }
  if (s.auth == "on" && s.keys_file.empty()) {
    return Error{"server.keys_file", "is required when server.auth is on"};
  }
  if (!is_loopback_listen(s.listen)) {
    if (s.auth == "off") {
      return Error{"server.auth", "off is allowed only on a loopback listener (listen is " + s.listen +
                                      "); configure server.keys_file"};
    }
    if (!s.auth_enabled()) {
      return Error{"server.keys_file", "listen " + s.listen +
                                           " is reachable from other hosts, so client keys are required "
                                           "(set server.keys_file; server.auth stays auto or on)"};
    }
  }
  if (!s.admin_listen.empty()) {
    auto colon = s.admin_listen.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.admin_listen.size()) {
      return Error{"server.admin_listen", "must be HOST:PORT or \"\" (got '" + s.admin_listen + "')"};
    }
    if (!is_loopback_listen(s.admin_listen) && s.admin_token_env.empty()) {
      return Error{"server.admin_token_env", "admin_listen " + s.admin_listen +
                                                 " is not loopback, so an admin token is required"};
    }
  }
  return Ok{};
}

Error field_error(const std::string& source, const std::string& field, const std::string& reason) {
  return Error{"config_invalid", source + ": " + field + ": " + reason};
}

}  // namespace

bool is_loopback_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  std::string host = listen.substr(0, colon == std::string::npos ? listen.size() : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8 in dotted form; anything else (0.0.0.0, ::, a LAN address) reaches the network.
  if (host.rfind("127.", 0) != 0) return false;
  return host.find_first_not_of("0123456789.") == std::string::npos;
}

const PoolConfig* Config::find_pool(const std::string& name) const {
  for (const auto& pool : pools) {
    if (pool.name == name) return &pool;
  }
  return nullptr;
}

Config default_config() {
  Config config;
  auto sim_member = [](const std::string& model, double in_price, double out_price) {
    UpstreamConfig up;
    up.name = "local-sim";
    up.base_url = "http://127.0.0.1:9101/v1";
    up.model = model;
    up.price_input_per_1k = in_price;
    up.price_output_per_1k = out_price;
    return up;
  };
  config.pools.push_back({"cloud-small", "p2c", {sim_member("sim-small", 0.00015, 0.0006)}});
  config.pools.push_back({"cloud-large", "p2c", {sim_member("sim-large", 0.0025, 0.01)}});
  return config;
}

Status validate_config(const Config& config) {
  const std::string& src = config.source;
  const ServerConfig& s = config.server;
  auto colon = s.listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.listen.size()) {
    return field_error(src, "server.listen", "must be HOST:PORT (got '" + s.listen + "')");
  }
  if (s.threads < 0) return field_error(src, "server.threads", "must be >= 0 (0 = all cores)");
  if (auto auth = check_auth(s); !auth) return field_error(src, auth.error().code, auth.error().message);
  try {
    positive(s.max_body_bytes, "server.max_body_bytes");
    positive(s.idle_timeout_ms, "server.idle_timeout_ms");
    positive(s.read_timeout_ms, "server.read_timeout_ms");
    positive(s.default_deadline_ms, "server.default_deadline_ms");
    positive(s.drain_timeout_ms, "server.drain_timeout_ms");
    positive(s.write_timeout_ms, "server.write_timeout_ms");
    positive(s.max_connections, "server.max_connections");
    positive(s.max_connections_per_ip, "server.max_connections_per_ip");
    positive(s.max_in_flight, "server.max_in_flight");
    if (s.edge_priority_reserve < 0) throw FieldError{"server.edge_priority_reserve", "must be >= 0"};
    if (s.default_deadline_ms > kMaxDeadlineMs) {
      throw FieldError{"server.default_deadline_ms", "must be at most " + std::to_string(kMaxDeadlineMs)};
    }
    positive(config.cloud.max_in_flight_response_bytes, "cloud.max_in_flight_response_bytes");
    check_chain(config.chain);
    check_cache(config.cache);
    if (config.log.rotate_bytes < 0) throw FieldError{"log.rotate_bytes", "must be >= 0 (0 = not by size)"};
    if (config.log.rotate_age_s < 0) throw FieldError{"log.rotate_age_s", "must be >= 0 (0 = not by age)"};
    positive(config.log.keep, "log.keep");
    if (!config.routing.complexity_model.empty() &&
        config.routing.complexity_model.find_first_not_of(" \t") == std::string::npos) {
      throw FieldError{"routing.complexity_model", "is blank (omit it for the hand-written score)"};
    }
    if (!config.routing.complexity_model.empty()) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(
              std::filesystem::path(config.routing.complexity_model) / "manifest.json", ec)) {
        throw FieldError{"routing.complexity_model",
                         "'" + config.routing.complexity_model +
                             "' is not a model directory (no manifest.json); write one with "
                             "`hengshi train-complexity`"};
      }
    }
    if (config.routing.watch_interval_ms < 0) {
      throw FieldError{"routing.watch_interval_ms", "must be >= 0 (0 = no file watching)"};
    }
    const EdgeLlmConfig& llm = config.edge.llm;
    if (llm.threads < 0) throw FieldError{"edge.llm.threads", "must be >= 0 (0 = cores / workers)"};
    positive(llm.context_tokens, "edge.llm.context_tokens");
    positive(llm.max_tokens, "edge.llm.max_tokens");
    positive(llm.workers, "edge.llm.workers");
    positive(llm.max_queue, "edge.llm.max_queue");
    if (llm.watch_interval_ms < 0) {
      throw FieldError{"edge.llm.watch_interval_ms", "must be >= 0 (0 = the serving directories are not watched)"};
    }
    positive(llm.summary_turns, "edge.llm.summary_turns");
    positive(llm.summary_chars, "edge.llm.summary_chars");
    if (!(llm.gate.f1_tolerance >= 0 && llm.gate.f1_tolerance <= 1)) {
      throw FieldError{"edge.llm.gate.f1_tolerance", "must be in [0, 1]"};
    }
    if (!(llm.gate.speed_tolerance >= 0 && llm.gate.speed_tolerance < 1)) {
      throw FieldError{"edge.llm.gate.speed_tolerance", "must be in [0, 1)"};
    }
    for (const auto& [value, field] : {std::pair{llm.gate.agreement_tolerance, "edge.llm.gate.agreement_tolerance"},
                                       std::pair{llm.gate.refusal_tolerance, "edge.llm.gate.refusal_tolerance"}}) {
      if (!(value >= 0 && value <= 1)) throw FieldError{field, "must be in [0, 1]"};
    }
    if (llm.gate.max_rows < 0) throw FieldError{"edge.llm.gate.max_rows", "must be >= 0 (0 = all)"};
    std::set<std::string> pool_names;
    for (const auto& pool : config.pools) {
      std::string path = "pools." + pool.name;
      if (pool.name != "cloud-small" && pool.name != "cloud-large") {
        throw FieldError{path, "unknown pool (pools are cloud-small and cloud-large)"};
      }
      if (!pool_names.insert(pool.name).second) throw FieldError{path, "defined twice"};
      if (pool.balancer != "p2c" && pool.balancer != "least_outstanding") {
        throw FieldError{path + ".balancer", "must be p2c or least_outstanding (got '" +
                                                 pool.balancer + "')"};
      }
      if (pool.members.empty()) throw FieldError{path + ".members", "must not be empty"};
      std::set<std::string> member_names;
      for (std::size_t i = 0; i < pool.members.size(); ++i) {
        const auto& up = pool.members[i];
        std::string mpath = path + ".members[" + std::to_string(i) + "]";
        if (!member_names.insert(up.name).second) {
          throw FieldError{mpath + ".name", "'" + up.name + "' is used twice in this pool"};
        }
        if (up.name.empty()) throw FieldError{mpath + ".name", "is required"};
        auto url = parse_url(up.base_url);
        if (!url) throw FieldError{mpath + ".base_url", url.error().message};
        if (!url->tls() && !up.allow_plaintext && !is_loopback_listen(url->host + ":" + url->port)) {
          throw FieldError{mpath + ".allow_plaintext",
                           "base_url " + up.base_url +
                               " is plain http to a host that is not loopback (the key and prompts "
                               "would cross the network in clear); use https or set "
                               "allow_plaintext: true on this member"};
        }
        positive(up.max_response_bytes, mpath + ".max_response_bytes");
        positive(up.max_stream_bytes, mpath + ".max_stream_bytes");
        positive(up.connect_timeout_ms, mpath + ".connect_timeout_ms");
        positive(up.ttft_timeout_ms, mpath + ".ttft_timeout_ms");
        positive(up.total_timeout_ms, mpath + ".total_timeout_ms");
        positive(up.max_concurrent, mpath + ".max_concurrent");
        if (up.price_input_per_1k < 0) throw FieldError{mpath + ".price_input_per_1k", "must be >= 0"};
        if (up.price_output_per_1k < 0) throw FieldError{mpath + ".price_output_per_1k", "must be >= 0"};
      }
    }
    if (!config.find_pool(config.routing.default_pool)) {
      throw FieldError{"routing.default_pool",
                       "names pool '" + config.routing.default_pool + "', which is not defined"};
    }
  } catch (const FieldError& e) {
    return field_error(src, e.field, e.reason);
  }
  return Ok{};
}

Result<Config> load_config_text(const std::string& yaml_text, const std::string& source) {
  Config config = default_config();
  config.source = source;
  try {
    apply(YAML::Load(yaml_text), config);
  } catch (const FieldError& e) {
    return field_error(source, e.field, e.reason);
  } catch (const YAML::Exception& e) {
    return Error{"config_invalid", source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  auto valid = validate_config(config);
  if (!valid) return valid.error();
  return config;
}

Result<Config> load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"config_unreadable", path + ": cannot open config file"};
  std::stringstream text;
  text << in.rdbuf();
  return load_config_text(text.str(), path);
}

}  // namespace hengshi
