#include "core/json_members.h"

#include "core/json_text.h"

namespace hengshi {

void append_dom_text(std::string& out, simdjson::dom::element value) {
  using Type = simdjson::dom::element_type;
  switch (value.type()) {
    case Type::OBJECT: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : sorted_members(value.get_object().value_unsafe())) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, key);
        out += ':';
        append_dom_text(out, member);
      }
      out += '}';
      return;
    }
    case Type::ARRAY: {
      out += '[';
      bool first = true;
      const simdjson::dom::array items = value.get_array().value_unsafe();
      for (simdjson::dom::element item : items) {
        if (!first) out += ',';
        first = false;
        append_dom_text(out, item);
      }
      out += ']';
      return;
    }
    case Type::STRING: append_json_string(out, value.get_string().value_unsafe()); return;
    case Type::BOOL: out += value.get_bool().value_unsafe() ? "true" : "false"; return;
    case Type::INT64: append_dom_integer(out, value.get_int64().value_unsafe()); return;
    case Type::UINT64: append_dom_integer(out, value.get_uint64().value_unsafe()); return;
    case Type::DOUBLE: append_dom_double(out, value.get_double().value_unsafe()); return;
    case Type::NULL_VALUE: out += "null"; return;
  }
}

}  // namespace hengshi
