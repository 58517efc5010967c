// Completion text: the deterministic words the simulator answers with. 1 token ~ 1 word.
// The answer is "[<name>/<model>]" followed by the words of the last user message and then
// filler words, cut to the planned token count, so a test can see which simulator and model
// answered and that its own prompt reached the upstream.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hengshi::sim {

// Whitespace-separated words in `text`: the simulator's token count.
std::int64_t count_words(std::string_view text);

// Exactly `tokens` words (at least 1: the tag). Joined with single spaces they are the content;
// a stream sends word i as " " + word (the first without the space).
std::vector<std::string> completion_words(std::string_view sim_name, std::string_view model,
                                          std::string_view last_user_text, std::int64_t tokens);

}  // namespace hengshi::sim
