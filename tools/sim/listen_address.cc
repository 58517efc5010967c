#include "sim/listen_address.h"

#include <charconv>

namespace hengshi::sim {

Result<tcp::endpoint> resolve_listen_address(std::string_view host_port) {
  auto fail = [&](const std::string& why) {
    return Error{"invalid_listen", "--listen '" + std::string(host_port) + "': " + why};
  };
  auto colon = host_port.rfind(':');
  if (colon == std::string_view::npos) return fail("want HOST:PORT, e.g. 127.0.0.1:9101");
  std::string_view host = host_port.substr(0, colon);
  std::string_view port_text = host_port.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return fail("HOST is empty");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return fail("PORT must be 0-65535 (0 picks a free port)");
  }

  boost::system::error_code error;
  auto address = asio::ip::make_address(std::string(host), error);
  if (!error) return tcp::endpoint(address, static_cast<unsigned short>(port));

  asio::io_context resolver_context;
  tcp::resolver resolver(resolver_context);
  auto results = resolver.resolve(std::string(host), std::string(port_text), error);
  if (error || results.empty()) return fail("cannot resolve HOST: " + error.message());
  return results.begin()->endpoint();
}

std::string endpoint_url(const tcp::endpoint& endpoint) {
  std::string host = endpoint.address().to_string();
  if (endpoint.address().is_v6()) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(endpoint.port());
}

}  // namespace hengshi::sim
