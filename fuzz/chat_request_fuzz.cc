// Fuzzes hengshi::parse_chat_request with arbitrary request bodies. It must answer every body with
// a request or a 400, never throw; an accepted body must survive what the gateway then does with
// it (forwarding upstream dumps it, routing reads the last user message). The DOM built from the
// kept parse must be nlohmann's own reading of the body, and members forwarded as the caller
// wrote them must read back as exactly that DOM's (what the router checked).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/chat_request.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto parsed = hengshi::parse_chat_request(body);  // an escaping exception aborts: a finding
  if (!parsed) {
    const hengshi::ApiError& error = parsed.error();
    FUZZ_CHECK(error.status == 400 && !error.message.empty());
    // The error quotes the caller's text: the gateway sends it with invalid UTF-8 replaced.
    (void)error.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
  }
  const hengshi::ChatRequest& request = parsed.value();
  FUZZ_CHECK(!request.messages.empty());
  (void)request.last_user_text();
  const nlohmann::json& dom = request.body();
  (void)dom.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  nlohmann::json as_nlohmann = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!as_nlohmann.is_discarded() && as_nlohmann.is_object());
  as_nlohmann.erase("hengshi");
  FUZZ_CHECK(dom == as_nlohmann);
  if (request.forwarded_members) {
    const nlohmann::json members =
        nlohmann::json::parse("{" + *request.forwarded_members + "}", nullptr, /*allow_exceptions=*/false);
    nlohmann::json expected = dom;
    for (std::string_view name : hengshi::kMembersWrittenAgain) expected.erase(std::string(name));
    FUZZ_CHECK(members == expected);
  }
  return 0;
}
