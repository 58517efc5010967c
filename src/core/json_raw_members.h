// The top-level members of a JSON object as the caller wrote them. A request whose members go on
// to an upstream unchanged is spliced from these bytes instead of written again from its DOM
// (cloud/upstream_body), which the hot path's profile showed costs more than finding them.
#pragma once

#include <span>
#include <optional>
#include <string>
#include <string_view>

namespace hengshi {

// `"name":value` for each top-level member of `object_text` whose name is not in `left_out`,
// joined by ',' in the text's order, byte for byte. nullopt when the text is not a JSON object or
// a member's name holds an escape (it would need decoding to compare). The text must have passed
// a validating parse first (parse_json_document): this only finds where each member ends.
std::optional<std::string> json_raw_members(std::string_view object_text,
                                            std::span<const std::string_view> left_out);

}  // namespace hengshi
