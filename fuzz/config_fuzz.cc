// Fuzzes hengshi::load_config_text with arbitrary YAML. A bad file must come back as an error
// naming the source, never as an exception or a crash (the file watcher reloads whatever lands).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = hengshi::load_config_text(text, "fuzz.yaml");
  if (!config) {
    FUZZ_CHECK(!config.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(hengshi::validate_config(config.value()).ok());  // what loaded was validated
  return 0;
}
