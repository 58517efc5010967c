#include "support/prometheus_server.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "support/free_port.h"
#include "support/http_client.h"
#include "support/wait_until.h"

namespace hengshi::testing {
namespace {

std::string url_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

PrometheusServer::PrometheusServer(int target_port) {
  const std::string binary = "/usr/bin/prometheus";
  if (::access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error(binary + " is missing: scripts/setup installs Debian's prometheus");
  }
  dir_ = temp_path("prometheus");
  std::filesystem::create_directories(dir_ + "/data");
  std::ofstream(dir_ + "/prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                          << "scrape_configs:\n  - job_name: hengshi\n    static_configs:\n"
                                          << "      - targets: ['127.0.0.1:" << target_port << "']\n";
  std::string output;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    process_ = std::make_unique<ChildProcess>(ChildProcess::launch(
        {binary, "--config.file=" + dir_ + "/prometheus.yml", "--storage.tsdb.path=" + dir_ + "/data",
         "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"}));
    auto ready = [this] {
      if (!process_->running()) return true;
      try {
        return http_call("127.0.0.1", port_, {"GET", "/-/ready", "", "", {}}, std::chrono::seconds(2)).status == 200;
      } catch (const std::exception&) {
        return false;
      }
    };
    if (wait_until(ready, std::chrono::seconds(30)) && process_->running()) return;
    output = process_->output();
    process_.reset();
  }
  throw std::runtime_error("prometheus did not start:\n" + output);
}

PrometheusServer::~PrometheusServer() {
  process_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::optional<double> PrometheusServer::query(const std::string& promql) const {
  HttpResult reply;
  try {
    reply = http_call("127.0.0.1", port_, {"GET", "/api/v1/query?query=" + url_encode(promql), "", "", {}});
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (reply.status != 200) return std::nullopt;
  const auto body = nlohmann::json::parse(reply.body, nullptr, false);
  if (!body.is_object() || body.value("status", "") != "success") return std::nullopt;
  const auto& result = body["data"]["result"];
  if (!result.is_array() || result.empty()) return std::nullopt;
  // A vector sample: {"metric": {...}, "value": [time, "text"]}.
  const auto& value = result[0]["value"];
  if (!value.is_array() || value.size() != 2 || !value[1].is_string()) return std::nullopt;
  return std::stod(value[1].get<std::string>());
}

}  // namespace hengshi::testing
