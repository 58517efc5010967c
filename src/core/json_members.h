// Reading simdjson's DOM the way nlohmann's DOM of the same text reads: a repeated member name
// holds its last value (JSON.parse, Python's json and nlohmann keep the last; simdjson's own
// lookup finds the first), and an object's members come in the order of their names (nlohmann's
// std::map). Code that moved from the nlohmann DOM to simdjson's tape keeps its behaviour,
// which error a request with two bad fields gets included.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include <boost/container/small_vector.hpp>
#include <simdjson.h>

namespace hengshi {

// The member's value as a client reads it, with a repeated name the last one.
inline bool last_member(simdjson::dom::object object, std::string_view key, simdjson::dom::element& out) {
  bool found = false;
  for (auto field : object) {
    if (field.key == key) {
      out = field.value;
      found = true;
    }
  }
  return found;
}

struct JsonMember {
  std::string_view key;
  simdjson::dom::element value;
};
// Inline room for a usual object; a wider one spills to the heap.
using JsonMembers = boost::container::small_vector<JsonMember, 16>;

// The object's members sorted by name (bytewise, as std::string compares), each name once with
// its last value.
inline JsonMembers sorted_members(simdjson::dom::object object) {
  JsonMembers members;
  for (auto field : object) members.push_back({field.key, field.value});
  const auto by_name = [](const JsonMember& a, const JsonMember& b) { return a.key < b.key; };
  if (members.size() <= 32) {
    // Insertion sort: stable, and no temporary buffer (std::stable_sort allocates one).
    for (std::size_t i = 1; i < members.size(); ++i) {
      for (std::size_t j = i; j > 0 && by_name(members[j], members[j - 1]); --j) std::swap(members[j], members[j - 1]);
    }
  } else {
    std::stable_sort(members.begin(), members.end(), by_name);
  }
  // Equal names sit together in document order: keep the last of each run.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i + 1 < members.size() && members[i + 1].key == members[i].key) continue;
    members[kept++] = members[i];
  }
  members.resize(kept);
  return members;
}

// The value as dump_text() writes its nlohmann DOM, byte for byte: members sorted, a repeated
// name once with its last value, nlohmann's number text. For keys computed from a body (the
// cache's scope) without building the DOM. Recursive: the parse bounded the depth.
void append_dom_text(std::string& out, simdjson::dom::element value);

}  // namespace hengshi
