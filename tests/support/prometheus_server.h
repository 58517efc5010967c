// PrometheusServer: a real Prometheus (Debian's `prometheus`, installed by scripts/setup) for a
// test, on a free loopback port, scraping one target every second into a temporary TSDB; killed
// and its data removed with the object. Ready once /-/ready answers 200.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "support/child_process.h"

namespace hengshi::testing {

class PrometheusServer {
 public:
  // Scrapes http://127.0.0.1:<target_port>/metrics. Throws std::runtime_error (with the server's
  // output) when it is not ready within 30 s.
  explicit PrometheusServer(int target_port);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  int port() const { return port_; }
  // An instant query (GET /api/v1/query); the scalar value of its first sample, or nullopt when
  // the query returned no sample or failed.
  std::optional<double> query(const std::string& promql) const;

 private:
  int port_ = 0;
  std::string dir_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace hengshi::testing
