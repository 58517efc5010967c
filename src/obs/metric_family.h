// MetricFamily: a labelled counter or histogram family whose label values come per call (route,
// reason, status…), resolved to its series once per distinct combination. Registry::counter()
// builds the name, help and label strings and walks two maps under a lock on every call; on the
// request path that was a dozen allocations per metric. Series never leave the registry, so a
// resolved pointer stays valid.
//
// Thread-safe: a small lock guards the combination → series map.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "obs/metrics.h"

namespace hengshi::obs {

template <typename Metric>
class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

  // The series for these label values, in the order of the label names.
  Metric& at(std::initializer_list<std::string_view> values) {
    if (values.size() != label_names_.size()) throw std::logic_error("metric " + name_ + ": wrong label count");
    // Length-prefixed, so caller-chosen values (a task type) cannot make two combinations collide.
    // One buffer per thread, cleared but not freed: a key outgrows the short-string buffer, and a
    // fresh string per call was about 8% of a proxied request's allocations.
    thread_local std::string key;
    key.clear();
    for (std::string_view value : values) {
      const auto size = static_cast<std::uint32_t>(value.size());
      key.append(reinterpret_cast<const char*>(&size), sizeof size);
      key.append(value);
    }
    std::lock_guard lock(mutex_);
    auto found = series_.find(key);
    if (found != series_.end()) return *found->second;
    Labels labels;
    auto value = values.begin();
    for (const auto& label : label_names_) labels.emplace_back(label, std::string(*value++));
    Metric* metric = &resolve(labels);
    series_.emplace(key, metric);
    return *metric;
  }

 private:
  Metric& resolve(const Labels& labels);

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::mutex mutex_;
  std::unordered_map<std::string, Metric*> series_;
};

template <>
inline Counter& MetricFamily<Counter>::resolve(const Labels& labels) {
  return Registry::global().counter(name_, help_, labels);
}

template <>
inline Histogram& MetricFamily<Histogram>::resolve(const Labels& labels) {
  return Registry::global().histogram(name_, help_, labels);
}

using CounterFamily = MetricFamily<Counter>;
using HistogramFamily = MetricFamily<Histogram>;

}  // namespace hengshi::obs
