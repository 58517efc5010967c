// Url: the parts of an http(s) base URL that an upstream connection needs.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace hengshi {

struct Url {
  std::string scheme;  // http | https
  std::string host;
  std::string port;    // defaulted from the scheme when absent
  std::string path;    // without trailing slash, e.g. "/v1"; empty for the root

  bool tls() const { return scheme == "https"; }
};

Result<Url> parse_url(std::string_view text);

}  // namespace hengshi
