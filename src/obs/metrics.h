// Metrics registry: counters, gauges and histograms with labels, rendered in Prometheus text
// exposition format for GET /metrics. The registry is the one global the project allows
// (STYLE.md): each part declares its metrics in one place next to the code that bumps them.
//
// Thread-safety: series creation takes a mutex; the returned references stay valid for the
// registry's lifetime and their updates are lock-free atomics, so hot paths look a series up
// once and keep the reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace hengshi::obs {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double amount = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double amount = 1.0);
  void dec(double amount = 1.0) { inc(-amount); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative histogram with fixed upper bounds (seconds for latencies, by Prometheus convention).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  std::uint64_t bucket_count(std::size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // one per bound, non-cumulative
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

// Latency buckets from 50 µs to 60 s: wide enough for edge answers and slow cloud calls.
const std::vector<double>& latency_buckets_seconds();

// The q-quantile (0..1) of what `histogram` observed, interpolated linearly inside its bucket as
// Prometheus's histogram_quantile() does; 0 when it observed nothing, the last bound past it.
double histogram_quantile(const Histogram& histogram, double q);
// The same over bucket counts (non-cumulative, one per bound) and a total that may include
// observations past the last bound: how merged histograms are read.
double bucket_quantile(const std::vector<double>& bounds, const std::vector<std::uint64_t>& counts,
                       std::uint64_t total, double q);

// One series of a counter or gauge family, read at one instant.
struct Sample {
  Labels labels;
  double value = 0.0;
};

class Registry {
 public:
  // The process-wide registry.
  static Registry& global();

  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const Labels& labels = {},
                       const std::vector<double>& upper_bounds = latency_buckets_seconds());

  // Prometheus text exposition format 0.0.4.
  std::string render() const;

  // What /admin/stats reads (the metrics are the one record of traffic; the stats are a view of
  // them): every series of a counter or gauge family, and every histogram of a family (pointers
  // stay valid for the registry's lifetime). Empty for an unknown name.
  std::vector<Sample> values(const std::string& name) const;
  std::vector<std::pair<Labels, const Histogram*>> histograms(const std::string& name) const;

 private:
  enum class Kind { counter, gauge, histogram };
  struct Family {
    Kind kind;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Kind kind);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace hengshi::obs
