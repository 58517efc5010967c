// Typed reads of YAML fields with errors that name the field: the shared walking code of every
// config-like file (config.cc, router_policy.cc). FieldError is thrown only while walking a
// document and must be caught by the file's loader and turned into an Error value.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>

#include <yaml-cpp/yaml.h>

namespace hengshi::yaml_fields {

struct FieldError {
  std::string field;
  std::string reason;
};

inline std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Refuses keys outside `known`, listing the allowed ones (a typo must not silently default).
inline void reject_unknown(const YAML::Node& node, const std::string& path,
                           const std::set<std::string>& known) {
  if (!node.IsMap()) throw FieldError{path.empty() ? "<root>" : path, "must be a mapping"};
  for (const auto& item : node) {
    auto key = item.first.as<std::string>();
    if (!known.count(key)) {
      std::string allowed;
      for (const auto& k : known) allowed += (allowed.empty() ? "" : ", ") + k;
      throw FieldError{join(path, key), "unknown field (allowed: " + allowed + ")"};
    }
  }
}

// Reads node[key] into `out` when present; a wrong type names the field and the type wanted.
template <typename T>
void read(const YAML::Node& node, const std::string& path, const std::string& key, T& out) {
  const YAML::Node child = node[key];
  if (!child) return;
  try {
    out = child.as<T>();
  } catch (const YAML::Exception&) {
    const char* want = std::is_same_v<T, std::string> ? "a string"
                       : std::is_same_v<T, bool>      ? "a boolean"
                       : std::is_integral_v<T>        ? "an integer"
                       : std::is_arithmetic_v<T>      ? "a number"
                                                      : "a list of strings";
    throw FieldError{join(path, key), std::string("must be ") + want};
  }
}

inline void positive(std::int64_t value, const std::string& field) {
  if (value <= 0) throw FieldError{field, "must be > 0 (got " + std::to_string(value) + ")"};
}

}  // namespace hengshi::yaml_fields
