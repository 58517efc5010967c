// What a cloud call sends on: the caller's body and, when the request's parse vouched for them
// (ChatRequest::forwarded_members), its members as the caller wrote them. upstream_body splices
// those bytes instead of writing the DOM; a body built in the gateway (a verify check, a shadow
// call) has only the DOM. A request's DOM is built only when something asks for it (dom()).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/chat_request.h"

namespace hengshi::cloud {

class ForwardBody {
 public:
  ForwardBody(const nlohmann::json& body) : dom_(&body) {}  // NOLINT(google-explicit-constructor): any DOM forwards
  explicit ForwardBody(const ChatRequest& request)
      : members(request.forwarded_members ? &*request.forwarded_members : nullptr), request_(&request) {}

  const nlohmann::json& dom() const { return dom_ != nullptr ? *dom_ : request_->body(); }
  // The body holds a "stream_options" object (what a stream's body merges include_usage into).
  bool has_stream_options() const {
    if (request_ != nullptr) return request_->sent_stream_options();
    const auto it = dom_->is_object() ? dom_->find("stream_options") : dom_->end();
    return it != dom_->end() && it->is_object();
  }

  // stream_options.include_usage is true: the caller asked for the usage chunk.
  bool caller_wants_usage() const {
    if (request_ != nullptr) return request_->include_usage;
    if (!has_stream_options()) return false;
    const nlohmann::json& options = (*dom_)["stream_options"];
    const auto include = options.find("include_usage");
    return include != options.end() && include->is_boolean() && include->get<bool>();
  }

  // Every member of the body but kMembersWrittenAgain, as text; null: written from dom().
  const std::string* members = nullptr;

 private:
  const nlohmann::json* dom_ = nullptr;
  const ChatRequest* request_ = nullptr;
};

}  // namespace hengshi::cloud
