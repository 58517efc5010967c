// Listen address: "HOST:PORT" (or "[V6]:PORT") as given to --listen, resolved to one endpoint.
// Port 0 asks the kernel for a free port. HOST may be an IP literal or a name ("localhost"),
// which is resolved once, synchronously, at start-up.
#pragma once

#include <string>
#include <string_view>

#include "core/asio.h"
#include "core/result.h"

namespace hengshi::sim {

Result<tcp::endpoint> resolve_listen_address(std::string_view host_port);

// "http://HOST:PORT" for an endpoint, with IPv6 addresses bracketed.
std::string endpoint_url(const tcp::endpoint& endpoint);

}  // namespace hengshi::sim
