// Client TLS contexts for https upstreams. Verification is on by default against the system's
// CA store; a member may add its own CA bundle (ca_file) or, for tests and private networks,
// turn verification off (tls_verify: false). Host name checks are per connection (SNI and the
// certificate's name are set on each stream, see upstream_client.cc), so one context can be
// shared by every member that needs nothing special.
#pragma once

#include <memory>

#include "core/config.h"
#include "core/result.h"

namespace boost::asio::ssl {
class context;
}

namespace hengshi::cloud {

// TLS 1.2+, system CAs, peer verification on.
Result<std::shared_ptr<boost::asio::ssl::context>> make_client_tls_context();

// The context `member` should use: `shared` (created with make_client_tls_context() when null)
// unless the member sets ca_file or turns verification off, which gets it a context of its own.
// Fails, naming the member and the file, when ca_file cannot be loaded.
Result<std::shared_ptr<boost::asio::ssl::context>> make_member_tls_context(
    const UpstreamConfig& member, std::shared_ptr<boost::asio::ssl::context> shared);

}  // namespace hengshi::cloud
