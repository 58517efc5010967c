// UpstreamResponseParser: Beast's response parser that stores only the header fields the
// upstream client reads (Content-Type, Retry-After). Beast stores every field it parses, an
// allocation and a case-insensitive ordered insert each, and a cloud reply carries a dozen or
// more the gateway never looks at (rate-limit counters, tracing ids, cookies). Parsing and its
// checks are Beast's, unchanged: Content-Length, Transfer-Encoding and Connection still drive
// the body's framing and keep_alive() through the parser's own state, not through the fields.
#pragma once

#include <boost/beast/http.hpp>

namespace hengshi::cloud {

template <class Body>
class UpstreamResponseParser : public boost::beast::http::response_parser<Body> {
 public:
  using boost::beast::http::response_parser<Body>::response_parser;

  // Whether a field of this name is kept in get()'s header.
  static bool kept(boost::beast::http::field name) {
    return name == boost::beast::http::field::content_type || name == boost::beast::http::field::retry_after;
  }

 private:
  void on_field_impl(boost::beast::http::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, boost::beast::error_code& ec) override {
    ec = {};
    if (kept(name)) this->get().insert(name, name_string, value);
  }
};

}  // namespace hengshi::cloud
