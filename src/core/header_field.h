// A known header field's value, read as Beast's `fields[name]` reads it: the first field of that
// name in arrival order, empty when there is none. It walks the message's few fields comparing
// the enum Beast stored for each name as it parsed it, where `fields[name]` searches Beast's name
// tree with a case-insensitive string compare at each node (about 550 instructions a lookup,
// callgrind; the walk over a request's usual four to eight fields costs a few dozen).
#pragma once

#include <string_view>

#include "core/asio.h"

namespace hengshi {

template <typename Fields>
std::string_view field_value(const Fields& fields, http::field name) {
  for (const auto& field : fields) {
    if (field.name() == name) return to_std(field.value());
  }
  return {};
}

}  // namespace hengshi
