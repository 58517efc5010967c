// Project-wide entry point for Boost.Asio/Beast.
// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (DESIGN.md §7),
// so every file reaches Asio through this header.
#pragma once

#include <string_view>
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace hengshi {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

template <typename T>
using awaitable = boost::asio::awaitable<T>;
inline constexpr auto use_awaitable = boost::asio::use_awaitable;

// Beast 1.74 uses boost::string_view; the project uses std::string_view.
inline std::string_view to_std(boost::beast::string_view text) { return {text.data(), text.size()}; }
}  // namespace hengshi
