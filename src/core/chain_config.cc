#include "core/chain_config.h"

namespace hengshi {

const char* to_string(CommitMode mode) {
  switch (mode) {
    case CommitMode::adaptive:
      return "adaptive";
    case CommitMode::always:
      return "always";
    case CommitMode::never:
      return "never";
  }
  return "adaptive";
}

std::optional<CommitMode> commit_mode_from_string(std::string_view name) {
  if (name == "adaptive") return CommitMode::adaptive;
  if (name == "always") return CommitMode::always;
  if (name == "never") return CommitMode::never;
  return std::nullopt;
}

}  // namespace hengshi
