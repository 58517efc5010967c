#include "obs/metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace hengshi::obs {
namespace {

void atomic_add(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

std::string escape_label(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

std::string label_text(const Labels& labels, const std::string& extra_key = {},
                       const std::string& extra_value = {}) {
  if (labels.empty() && extra_key.empty()) return {};
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k + "=\"" + escape_label(v) + "\"";
  }
  if (!extra_key.empty()) {
    if (!first) out += ',';
    out += extra_key + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

}  // namespace

void Counter::inc(double amount) { atomic_add(value_, amount); }
void Gauge::inc(double amount) { atomic_add(value_, amount); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size())) {
  std::sort(bounds_.begin(), bounds_.end());
  for (std::size_t i = 0; i < bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::observe(double value) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  if (it != bounds_.end()) counts_[it - bounds_.begin()].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  atomic_add(sum_, value);
}

const std::vector<double>& latency_buckets_seconds() {
  static const std::vector<double> buckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                              0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                              0.5,     1,      2.5,     5,      10,    30, 60};
  return buckets;
}

double histogram_quantile(const Histogram& histogram, double q) {
  std::vector<std::uint64_t> counts(histogram.upper_bounds().size());
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = histogram.bucket_count(i);
  return bucket_quantile(histogram.upper_bounds(), counts, histogram.count(), q);
}

double bucket_quantile(const std::vector<double>& bounds, const std::vector<std::uint64_t>& counts,
                       std::uint64_t total, double q) {
  if (total == 0) return 0.0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double below = 0.0;  // observations in earlier buckets
  for (std::size_t i = 0; i < bounds.size() && i < counts.size(); ++i) {
    const double in_bucket = static_cast<double>(counts[i]);
    if (below + in_bucket >= rank && in_bucket > 0) {
      const double lower = i == 0 ? 0.0 : bounds[i - 1];
      return lower + (bounds[i] - lower) * (rank - below) / in_bucket;
    }
    below += in_bucket;
  }
  return bounds.empty() ? 0.0 : bounds.back();
}

std::vector<Sample> Registry::values(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::vector<Sample> out;
  auto it = families_.find(name);
  if (it == families_.end()) return out;
  for (const auto& [labels, c] : it->second.counters) out.push_back({labels, c->value()});
  for (const auto& [labels, g] : it->second.gauges) out.push_back({labels, g->value()});
  return out;
}

std::vector<std::pair<Labels, const Histogram*>> Registry::histograms(const std::string& name) const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<Labels, const Histogram*>> out;
  auto it = families_.find(name);
  if (it == families_.end()) return out;
  for (const auto& [labels, h] : it->second.histograms) out.emplace_back(labels, h.get());
  return out;
}

Registry& Registry::global() {
  static Registry registry;
  return registry;
}

Registry::Family& Registry::family(const std::string& name, const std::string& help, Kind kind) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.kind = kind;
    it->second.help = help;
  } else if (it->second.kind != kind) {
    throw std::logic_error("metric " + name + " registered twice with different kinds");
  }
  return it->second;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = family(name, help, Kind::counter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto& slot = family(name, help, Kind::gauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const Labels& labels, const std::vector<double>& upper_bounds) {
  std::lock_guard lock(mutex_);
  auto& slot = family(name, help, Kind::histogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(upper_bounds);
  return *slot;
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, fam] : families_) {
    const char* type = fam.kind == Kind::counter ? "counter"
                       : fam.kind == Kind::gauge ? "gauge"
                                                 : "histogram";
    out += "# HELP " + name + " " + fam.help + "\n# TYPE " + name + " " + type + "\n";
    for (const auto& [labels, c] : fam.counters) {
      out += name + label_text(labels) + " " + format_number(c->value()) + "\n";
    }
    for (const auto& [labels, g] : fam.gauges) {
      out += name + label_text(labels) + " " + format_number(g->value()) + "\n";
    }
    for (const auto& [labels, h] : fam.histograms) {
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < h->upper_bounds().size(); ++i) {
        cumulative += h->bucket_count(i);
        out += name + "_bucket" + label_text(labels, "le", format_number(h->upper_bounds()[i])) +
               " " + std::to_string(cumulative) + "\n";
      }
      out += name + "_bucket" + label_text(labels, "le", "+Inf") + " " +
             std::to_string(h->count()) + "\n";
      out += name + "_sum" + label_text(labels) + " " + format_number(h->sum()) + "\n";
      out += name + "_count" + label_text(labels) + " " + std::to_string(h->count()) + "\n";
    }
  }
  return out;
}

}  // namespace hengshi::obs
