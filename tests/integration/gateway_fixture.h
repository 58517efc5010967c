// GatewayFixture: a real `hengshi serve` in front of two real `hengshi-sim` upstreams (one per
// pool) on 127.0.0.1 random ports, with a config written for the test.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "support/child_process.h"
#include "support/http_client.h"
#include "support/wait_until.h"

namespace hengshi::testing {

struct GatewayOptions {
  std::string extra_server_yaml;     // appended under server:
  int small_ttft_timeout_ms = 1500;
  int small_total_timeout_ms = 3000;
  std::string small_url_override;    // e.g. a closed port for connect-failure tests
  std::string extra_yaml;            // appended at the top level (e.g. an edge: section)
  int max_body_bytes = 65536;
  bool expose_figures = true;  // most tests read the decision's figures from the response
  // Most tests count upstream calls for repeated questions: the cache is off unless a test
  // brings its own cache section.
  std::string cache_yaml = "cache: {enabled: false}\n";
  std::string log_yaml;           // appended under log: (rotation, text)
  std::string large_member_yaml;  // appended to cloud-large's member (e.g. its prices)
  int threads = 2;                // server.threads
};

class GatewayFixture : public ::testing::Test {
 protected:
  void start(const GatewayOptions& options = {}) {
    small_ = std::make_unique<ChildProcess>(ChildProcess::start(
        {binary_path("tools/sim/hengshi-sim"), "--listen", "127.0.0.1:0", "--name", "small-sim", "--seed", "1"}));
    large_ = std::make_unique<ChildProcess>(ChildProcess::start(
        {binary_path("tools/sim/hengshi-sim"), "--listen", "127.0.0.1:0", "--name", "large-sim", "--seed", "2"}));
    log_path_ = temp_path("requests.jsonl");
    config_path_ = temp_path("gateway.yaml");
    std::string small_url = options.small_url_override.empty() ? small_->base_url() + "/v1"
                                                               : options.small_url_override;
    std::ofstream(config_path_) << "server:\n"
                                << "  listen: 127.0.0.1:0\n"
                                << "  threads: " << options.threads << "\n"
                                << "  max_body_bytes: " << options.max_body_bytes << "\n"
                                << "  drain_timeout_ms: 10000\n"
                                << "  expose_figures: "
                                << (options.expose_figures ? "true" : "false") << "\n"
                                << "  admin_listen: 127.0.0.1:0\n"
                                << options.extra_server_yaml << "log:\n"
                                << "  requests: " << log_path_ << "\n"
                                << options.log_yaml << "pools:\n"
                                << "  cloud-small:\n"
                                << "    members:\n"
                                << "      - name: small-1\n"
                                << "        base_url: " << small_url << "\n"
                                << "        model: sim-small\n"
                                << "        price_input_per_1k: 1.0\n"
                                << "        price_output_per_1k: 2.0\n"
                                << "        connect_timeout_ms: 1000\n"
                                << "        ttft_timeout_ms: " << options.small_ttft_timeout_ms
                                << "\n"
                                << "        total_timeout_ms: " << options.small_total_timeout_ms
                                << "\n"
                                << "  cloud-large:\n"
                                << "    members:\n"
                                << "      - name: large-1\n"
                                << "        base_url: " << large_->base_url() << "/v1\n"
                                << "        model: sim-large\n"
                                << options.large_member_yaml << options.cache_yaml
                                << options.extra_yaml;
    gateway_ = std::make_unique<ChildProcess>(
        ChildProcess::start({binary_path("src/cli/hengshi"), "serve", "--config", config_path_}));
  }

  void TearDown() override {
    gateway_.reset();
    small_.reset();
    large_.reset();
    std::remove(config_path_.c_str());
    std::remove(log_path_.c_str());
  }

  HttpResult chat(const std::string& body, std::map<std::string, std::string> headers = {}) {
    HttpRequest request{"POST", "/v1/chat/completions", body, "application/json", std::move(headers)};
    return http_call(gateway_->host(), gateway_->port(), request);
  }
  HttpResult get(const std::string& target) {
    return http_call(gateway_->host(), gateway_->port(), {"GET", target, "", "", {}});
  }
  // The admin listener (/metrics, /admin/*), apart from the public port.
  HttpResult admin_get(const std::string& target, std::map<std::string, std::string> headers = {}) {
    return http_call(gateway_->host(), gateway_->admin_port(), {"GET", target, "", "", std::move(headers)});
  }
  HttpResult admin_post(const std::string& target, std::map<std::string, std::string> headers = {},
                        const std::string& body = "") {
    return http_call(gateway_->host(), gateway_->admin_port(),
                     {"POST", target, body, "application/json", std::move(headers)});
  }
  nlohmann::json sim_stats(ChildProcess& sim) {
    return http_call(sim.host(), sim.port(), {"GET", "/admin/stats", "", "", {}}).json();
  }
  int sim_requests(ChildProcess& sim) { return sim_stats(sim)["requests_total"].get<int>(); }
  void expect_gateway_alive() {
    auto health = get("/healthz");
    EXPECT_EQ(health.status, 200);
  }
  static std::string user_message(const std::string& model, const std::string& text, bool stream = false) {
    nlohmann::json body = {{"model", model}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    if (stream) body["stream"] = true;
    return body.dump();
  }

  std::unique_ptr<ChildProcess> small_;
  std::unique_ptr<ChildProcess> large_;
  std::unique_ptr<ChildProcess> gateway_;
  std::string config_path_;
  std::string log_path_;
};

}  // namespace hengshi::testing
