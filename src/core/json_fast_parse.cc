#include "core/json_fast_parse.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <boost/container/small_vector.hpp>
#include <simdjson.h>

namespace hengshi {
namespace {

using nlohmann::json;

// The DOM of a parsed value, as nlohmann's parser makes it. The depth was checked by scan():
// recursion is bounded by the text's nesting.
void build(simdjson::dom::element element, json& out) {
  using Type = simdjson::dom::element_type;
  switch (element.type()) {
    case Type::ARRAY: {
      out = json::array();
      // Named, not a temporary in the range-for: g++ 12 warns of a dangling tape pointer otherwise.
      const simdjson::dom::array items = element.get_array().value_unsafe();
      // The tape knows the count: one allocation for the elements, not one per doubling (capped:
      // simdjson saturates a huge array's count, and a hostile body should not size the reserve).
      out.get_ref<json::array_t&>().reserve(std::min<std::size_t>(items.size(), 4096));
      for (simdjson::dom::element item : items) {
        out.push_back(nullptr);
        build(item, out.back());
      }
      return;
    }
    case Type::OBJECT: {
      out = json::object();
      const simdjson::dom::object fields = element.get_object().value_unsafe();
      auto& members = out.get_ref<json::object_t&>();
      for (simdjson::dom::key_value_pair field : fields) {
        // A repeated name overwrites: the last one wins, as in nlohmann's parser.
        build(field.value, members[std::string(field.key)]);
      }
      return;
    }
    case Type::INT64: {
      const std::int64_t value = element.get_int64().value_unsafe();
      if (value >= 0) {
        out = static_cast<std::uint64_t>(value);  // nlohmann reads "5" as unsigned
      } else {
        out = value;
      }
      return;
    }
    case Type::UINT64: out = element.get_uint64().value_unsafe(); return;
    case Type::DOUBLE: out = element.get_double().value_unsafe(); return;
    case Type::STRING: out = std::string(element.get_string().value_unsafe()); return;
    case Type::BOOL: out = element.get_bool().value_unsafe(); return;
    case Type::NULL_VALUE: out = nullptr; return;
  }
}

// The depth limit and TextBeyondDom, in one walk. Recursion is bounded by `max_depth` (checked
// before going down).
bool scan(simdjson::dom::element element, int depth, int max_depth, TextBeyondDom& beyond) {
  using Type = simdjson::dom::element_type;
  switch (element.type()) {
    case Type::ARRAY: {
      if (depth > max_depth) return false;
      const simdjson::dom::array items = element.get_array().value_unsafe();
      for (simdjson::dom::element item : items) {
        if (!scan(item, depth + 1, max_depth, beyond)) return false;
      }
      return true;
    }
    case Type::OBJECT: {
      if (depth > max_depth) return false;
      const simdjson::dom::object fields = element.get_object().value_unsafe();
      boost::container::small_vector<std::string_view, 16> names;
      for (simdjson::dom::key_value_pair field : fields) {
        names.push_back(field.key);
        if (!scan(field.value, depth + 1, max_depth, beyond)) return false;
      }
      if (!beyond.repeated_names && names.size() > 8) {
        std::sort(names.begin(), names.end());
        beyond.repeated_names = std::adjacent_find(names.begin(), names.end()) != names.end();
      } else if (!beyond.repeated_names) {
        // A chat body's objects are small: comparing each pair (sizes first) beats sorting.
        for (std::size_t i = 0; i < names.size() && !beyond.repeated_names; ++i) {
          for (std::size_t j = i + 1; j < names.size(); ++j) {
            if (names[i] == names[j]) {
              beyond.repeated_names = true;
              break;
            }
          }
        }
      }
      return true;
    }
    case Type::DOUBLE:
      if (depth > 2) beyond.nested_doubles = true;  // the root is depth 1, its members' values 2
      return true;
    default:
      return true;
  }
}

}  // namespace

bool parse_json_document(std::string_view text, int max_depth, simdjson::dom::document& document,
                         TextBeyondDom* beyond) {
  // This thread's parser keeps its working buffers between calls; the document gets its own.
  thread_local simdjson::dom::parser parser;
  thread_local std::string padded;
  padded.assign(text);
  padded.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  simdjson::dom::element root;
  if (parser.parse_into_document(document, padded.data(), padded.size(), /*realloc_if_needed=*/false).get(root) !=
      simdjson::SUCCESS) {
    return false;
  }
  TextBeyondDom found;
  if (!scan(root, 1, max_depth, found)) return false;
  if (beyond != nullptr) *beyond = found;
  return true;
}

json to_nlohmann(const simdjson::dom::element& element) {
  json out;
  build(element, out);
  return out;
}

}  // namespace hengshi
