// Fuzzes cloud::read_reply_body and with_member with an upstream's non-streaming reply: bytes the
// gateway passes to its client with its metadata spliced in. Whatever simdjson accepts must stay
// JSON a client can read once the member is added (nlohmann parses the spliced text, and the
// member holds exactly what was added), and the bytes it rejects are left with the caller.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cloud/reply_body.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string raw = input;
  auto body = hengshi::cloud::read_reply_body(std::move(raw));
  if (!body) {
    FUZZ_CHECK(raw == input);  // refused bytes stay with the caller, for its error message
    return 0;
  }
  FUZZ_CHECK(body.value().raw == input);
  FUZZ_CHECK(nlohmann::json::accept(input));
  const std::string spliced = hengshi::cloud::with_member(body.value(), "hengshi", R"({"route":"edge","level":0})");
  const auto parsed = nlohmann::json::parse(spliced, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(parsed.is_object());
  FUZZ_CHECK(parsed.contains("choices") && parsed["choices"].is_array());
  FUZZ_CHECK(parsed["hengshi"] == nlohmann::json({{"route", "edge"}, {"level", 0}}));
  return 0;
}
