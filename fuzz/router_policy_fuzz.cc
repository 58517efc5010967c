// Fuzzes router::parse_router_policy with arbitrary YAML (operator-written, hot-reloaded: a bad
// file must be an error, never a crash). An accepted policy's PII detector is exercised on the
// policy text itself, so fuzzed custom patterns are run, not only compiled.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "router/router_policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto policy = hengshi::router::parse_router_policy(text, "fuzz-policy.yaml", "");
  if (!policy) {
    FUZZ_CHECK(!policy.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(policy.value() != nullptr);
  const auto& snapshot = *policy.value();
  FUZZ_CHECK(snapshot.pii.contains(text) == !snapshot.pii.find(text).empty());
  return 0;
}
