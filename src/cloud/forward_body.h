// What a cloud call sends on: the caller's body as a DOM and, when the request's parse vouched
// for them (ChatRequest::forwarded_members), its members as the caller wrote them. upstream_body
// splices those bytes instead of writing the DOM again; a body built in the gateway (a verify
// check, a shadow call) has only the DOM.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/chat_request.h"

namespace hengshi::cloud {

struct ForwardBody {
  ForwardBody(const nlohmann::json& body) : dom(body) {}  // NOLINT(google-explicit-constructor): any DOM forwards
  explicit ForwardBody(const ChatRequest& request)
      : dom(request.body), members(request.forwarded_members ? &*request.forwarded_members : nullptr) {}

  const nlohmann::json& dom;
  // Every member of `dom` but kMembersWrittenAgain, as text; null: written from `dom`.
  const std::string* members = nullptr;
};

}  // namespace hengshi::cloud
