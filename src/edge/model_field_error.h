// The error a model file's loader returns for a field that is missing or wrong: code
// "model_invalid", naming the file and the field, so an operator knows which file to fix.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/result.h"

namespace hengshi::edge {

inline Error model_field_invalid(const std::filesystem::path& file, std::string_view field,
                                 std::string_view why) {
  return Error{"model_invalid",
               file.string() + ": field \"" + std::string(field) + "\": " + std::string(why)};
}

}  // namespace hengshi::edge
