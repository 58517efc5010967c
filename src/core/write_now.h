// write_now / write_rest: a socket write that finishes at once costs no trip through the event loop.
//
// Asio 1.74 completes every asynchronous operation through the scheduler, even one whose first
// (speculative) send took every byte: a post, a pass of the event loop with its epoll_wait, and a
// composed write's layers of handlers. On the proxy path nearly every write finishes at once, so
// the gateway sends directly and awaits only what the kernel did not take (a full send buffer).
#pragma once

#include <cstddef>

#include "core/asio.h"

namespace hengshi {

// Sends as much of `buffers` as the socket takes without waiting; returns the bytes sent. A full
// send buffer is not an error: ec stays clear and the caller awaits write_rest() for the remainder.
// The socket is put in non-blocking mode on the first call (one ioctl): the gateway's sockets see
// no other synchronous operation, and Asio's asynchronous ones do not depend on the mode.
template <class ConstBufferSequence>
std::size_t write_now(tcp::socket& socket, const ConstBufferSequence& buffers, beast::error_code& ec) {
  ec = {};
  if (!socket.non_blocking()) {
    socket.non_blocking(true, ec);
    if (ec) return 0;
  }
  const std::size_t total = asio::buffer_size(buffers);
  std::size_t sent = socket.write_some(buffers, ec);
  if (!ec && sent < total) {  // a partial send: the rest, while the kernel still takes it
    beast::buffers_suffix<ConstBufferSequence> rest(buffers);
    rest.consume(sent);
    while (!ec && sent < total) {
      const std::size_t n = socket.write_some(rest, ec);
      rest.consume(n);
      sent += n;
    }
  }
  if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
  return sent;
}

// Whether write_now() left bytes to await.
template <class ConstBufferSequence>
bool write_pending(const ConstBufferSequence& buffers, std::size_t sent, const beast::error_code& ec) {
  return !ec && sent < asio::buffer_size(buffers);
}

// Writes what write_now() left (all of `buffers` after the first `sent` bytes) to any stream
// (a TLS one too, with `sent` 0); returns the bytes this wrote. The caller arms its write timeout.
template <class AsyncWriteStream, class ConstBufferSequence>
awaitable<std::size_t> write_rest(AsyncWriteStream& stream, const ConstBufferSequence& buffers, std::size_t sent,
                                  beast::error_code& ec) {
  beast::buffers_suffix<ConstBufferSequence> rest(buffers);
  rest.consume(sent);
  co_return co_await asio::async_write(stream, rest, asio::redirect_error(use_awaitable, ec));
}

}  // namespace hengshi
