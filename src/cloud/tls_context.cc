#include "cloud/tls_context.h"

#include <utility>

#include "core/asio.h"

#include <boost/asio/ssl.hpp>

namespace hengshi::cloud {
namespace {

Result<std::shared_ptr<asio::ssl::context>> make_context(const UpstreamConfig* member) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  beast::error_code ec;
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1,
                       ec);
  if (!ec) context->set_default_verify_paths(ec);
  if (ec) return Error{"tls_context", "cannot set up TLS: " + ec.message()};
  bool verify = member == nullptr || member->tls_verify;
  if (member != nullptr && !member->ca_file.empty()) {
    context->load_verify_file(member->ca_file, ec);
    if (ec) {
      return Error{"tls_ca_file", "upstream '" + member->name + "': cannot load ca_file '" +
                                      member->ca_file + "': " + ec.message()};
    }
  }
  context->set_verify_mode(verify ? asio::ssl::verify_peer : asio::ssl::verify_none, ec);
  if (ec) return Error{"tls_context", "cannot set up TLS: " + ec.message()};
  return context;
}

}  // namespace

Result<std::shared_ptr<asio::ssl::context>> make_client_tls_context() {
  return make_context(nullptr);
}

Result<std::shared_ptr<asio::ssl::context>> make_member_tls_context(
    const UpstreamConfig& member, std::shared_ptr<asio::ssl::context> shared) {
  if (!member.ca_file.empty() || !member.tls_verify) return make_context(&member);
  if (shared) return shared;
  return make_client_tls_context();
}

}  // namespace hengshi::cloud
