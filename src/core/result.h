// Result<T>: a value or an Error, for expected-failure paths (parse, config, upstream).
// std::expected is C++23; this is the minimal subset we need on C++20.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace hengshi {

// A plain error: a stable machine-readable code and a human message.
struct Error {
  std::string code;     // e.g. "config_invalid", "upstream_timeout"
  std::string message;  // names the file/field/reason where there is one
};

template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(E error) : state_(std::move(error)) {}      // NOLINT(google-explicit-constructor)
  // A default T built in place, to be filled through value() (no move of a T at all).
  Result(std::in_place_type_t<T>) : state_(std::in_place_type<T>) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  E& error() & { return std::get<E>(state_); }
  const E& error() const& { return std::get<E>(state_); }

 private:
  std::variant<T, E> state_;
};

// Result<void> equivalent.
struct Ok {};
using Status = Result<Ok>;

}  // namespace hengshi
