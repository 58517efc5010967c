// The request's own say over the answer cache: HTTP's Cache-Control (RFC 9111 §5.2.1).
//   no-cache   the answer must not come from the cache (it may still be stored)
//   no-store   the answer must neither come from nor go into the cache
// Other directives (max-age, ...) are ignored. Pure function.
#pragma once

#include <string_view>

namespace hengshi::server {

struct RequestCacheControl {
  bool no_cache = false;
  bool no_store = false;
};

RequestCacheControl parse_cache_control(std::string_view header_value);

}  // namespace hengshi::server
