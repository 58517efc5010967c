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

// Whether the message asks to keep the connection, as Beast's `message::keep_alive()` answers:
// from its first Connection field's tokens ("close" ends an HTTP/1.1 connection, "keep-alive"
// keeps an HTTP/1.0 one). Beast finds that field by a case-insensitive search of its name tree.
template <typename Message>
bool keep_alive_of(const Message& message) {
  for (const auto& field : message) {
    if (field.name() != http::field::connection) continue;
    http::token_list tokens{field.value()};  // Beast 1.74: exists() is not const
    return message.version() < 11 ? tokens.exists("keep-alive") : !tokens.exists("close");
  }
  return message.version() >= 11;
}

}  // namespace hengshi
