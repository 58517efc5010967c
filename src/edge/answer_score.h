// How close a generated answer is to the expected one: F1 over the "mixed segmentation" of
// Chinese reading-comprehension evaluation (CMRC 2018): every CJK or other non-ASCII letter is a
// token, every run of ASCII letters and digits is one lower-cased token, punctuation and space
// are dropped. Bag-of-characters F1 would credit gibberish for sharing the alphabet (a random
// model scored 0.4 against the demo FAQ's bilingual answers); whole English words do not.
// 1 = the same tokens, 0 = none shared.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hengshi::edge {

std::vector<std::string> mixed_segments(std::string_view text);
double char_f1(std::string_view predicted, std::string_view expected);
// The same answer once leading and trailing whitespace are set aside.
bool same_answer(std::string_view predicted, std::string_view expected);

}  // namespace hengshi::edge
