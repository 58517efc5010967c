#include "server/cache_control.h"

#include <cctype>
#include <string>

namespace hengshi::server {

RequestCacheControl parse_cache_control(std::string_view value) {
  RequestCacheControl out;
  while (!value.empty()) {
    const auto comma = value.find(',');
    std::string_view directive = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    if (const auto equals = directive.find('='); equals != std::string_view::npos) directive = directive.substr(0, equals);
    std::string name;
    for (char c : directive) {
      if (c != ' ' && c != '\t') name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (name == "no-cache") out.no_cache = true;
    if (name == "no-store") out.no_store = true;
  }
  return out;
}

}  // namespace hengshi::server
