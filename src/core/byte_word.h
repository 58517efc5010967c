// Tests on the eight bytes of a word at once, for scans that skip what cannot matter (plain
// ASCII in a JSON string, words without a digit). The classic "has a zero byte" bit tricks: each
// is exact as a yes/no for the bytes it names. Pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace hengshi {

inline constexpr std::uint64_t kByteOnes = 0x0101010101010101ULL;
inline constexpr std::uint64_t kByteHighs = kByteOnes * 0x80;

// The 8 bytes at `p` (no alignment needed).
inline std::uint64_t load_word(const char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

// Whether any byte is above 0x7F.
inline bool has_high_byte(std::uint64_t word) { return (word & kByteHighs) != 0; }

// Whether any byte is zero.
inline bool has_zero_byte(std::uint64_t word) { return ((word - kByteOnes) & ~word & kByteHighs) != 0; }

// Whether any byte equals `byte`.
inline bool has_byte(std::uint64_t word, unsigned char byte) { return has_zero_byte(word ^ (kByteOnes * byte)); }

// Whether any byte is below `n` (n <= 128), for a word with no byte above 0x7F.
inline bool has_byte_below(std::uint64_t word, unsigned char n) {
  return ((word - kByteOnes * n) & ~word & kByteHighs) != 0;
}

// Whether any byte b has low < b < high (low <= 127, high <= 128), for a word with no byte above
// 0x7F.
inline bool has_byte_between(std::uint64_t word, unsigned char low, unsigned char high) {
  return ((kByteOnes * (127 + high) - word) & ~word & (word + kByteOnes * (127 - low)) & kByteHighs) != 0;
}

}  // namespace hengshi
