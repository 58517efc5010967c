// The path of an HTTP request target: the part before any query string. The gateway and the
// admin surface both route on it, so "/v1/models?x=1" reaches the same handler as "/v1/models".
#pragma once

#include <string_view>

namespace hengshi::server {

inline std::string_view path_of(std::string_view target) {
  const auto query = target.find('?');
  return query == std::string_view::npos ? target : target.substr(0, query);
}

}  // namespace hengshi::server
