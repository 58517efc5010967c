// The published checksums behind the PII test numbers, so a test computes its bank cards and
// resident IDs rather than copying them (shared by the detector's and the router's tests).
#pragma once

#include <cstddef>
#include <string_view>

namespace hengshi::testing {

// Luhn (ISO/IEC 7812): every second digit from the right doubled, the digit sum a multiple of 10.
inline bool luhn_valid(std::string_view digits) {
  int sum = 0;
  bool twice = false;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it, twice = !twice) {
    int digit = *it - '0';
    if (twice) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return sum % 10 == 0;
}

// GB 11643 (MOD 11-2): the check character of a resident ID's first 17 digits.
inline char id_check_char(std::string_view first17) {
  static constexpr int kWeights[17] = {7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2};
  static constexpr char kCheck[] = "10X98765432";
  int sum = 0;
  for (std::size_t i = 0; i < 17; ++i) sum += (first17[i] - '0') * kWeights[i];
  return kCheck[sum % 11];
}

}  // namespace hengshi::testing
