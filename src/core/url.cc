#include "core/url.h"

#include <charconv>

namespace hengshi {

Result<Url> parse_url(std::string_view text) {
  Url url;
  auto scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) {
    return Error{"invalid_url", "'" + std::string(text) + "' has no scheme (want http:// or https://)"};
  }
  url.scheme = std::string(text.substr(0, scheme_end));
  if (url.scheme != "http" && url.scheme != "https") {
    return Error{"invalid_url", "'" + std::string(text) + "': scheme must be http or https"};
  }
  std::string_view rest = text.substr(scheme_end + 3);
  auto path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path = path_start == std::string_view::npos ? "" : rest.substr(path_start);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.path = std::string(path);

  if (authority.empty()) return Error{"invalid_url", "'" + std::string(text) + "' has no host"};
  if (authority.front() == '[') {  // [v6]:port
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return Error{"invalid_url", "'" + std::string(text) + "': unterminated IPv6 address"};
    }
    url.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() == ':') url.port = std::string(authority.substr(1));
  } else {
    auto colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) url.port = std::string(authority.substr(colon + 1));
  }
  if (url.host.empty()) return Error{"invalid_url", "'" + std::string(text) + "' has no host"};
  if (url.port.empty()) {
    url.port = url.tls() ? "443" : "80";
  } else {
    int port = 0;
    auto [ptr, ec] = std::from_chars(url.port.data(), url.port.data() + url.port.size(), port);
    if (ec != std::errc() || ptr != url.port.data() + url.port.size() || port <= 0 || port > 65535) {
      return Error{"invalid_url", "'" + std::string(text) + "': port must be 1-65535"};
    }
  }
  return url;
}

}  // namespace hengshi
