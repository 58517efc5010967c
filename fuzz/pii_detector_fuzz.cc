// Fuzzes router::PiiDetector with arbitrary text (mixed ASCII, full-width digits, CJK, broken
// UTF-8). Beyond not crashing it checks the documented contract: matches in order of offset,
// inside the text, never overlapping; contains() agrees with find(); redact() runs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "router/pii_detector.h"

namespace {

const hengshi::router::PiiDetector& detector() {
  // One custom pattern so overlap resolution between custom and built-in kinds is exercised.
  static const hengshi::router::PiiDetector instance = [] {
    hengshi::router::PiiConfig config;
    config.patterns.push_back({"order", "ORD-[0-9]{4,12}"});
    auto created = hengshi::router::PiiDetector::create(config);
    FUZZ_CHECK(created.ok());
    return created.value();
  }();
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& pii = detector();
  const auto matches = pii.find(text);
  std::size_t previous_end = 0;
  for (const auto& match : matches) {
    FUZZ_CHECK(match.length > 0);
    FUZZ_CHECK(match.offset >= previous_end);                        // ordered, no overlap
    FUZZ_CHECK(match.offset <= size && match.length <= size - match.offset);  // inside the text
    FUZZ_CHECK(!match.kind.empty());
    previous_end = match.offset + match.length;
  }
  FUZZ_CHECK(pii.contains(text) == !matches.empty());
  const std::string redacted = pii.redact(text);
  if (matches.empty()) FUZZ_CHECK(redacted == text);
  return 0;
}
