#include "core/write_now.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <thread>

namespace hengshi {
namespace {

// A connected pair of loopback TCP sockets on one io_context.
struct SocketPair {
  asio::io_context io;
  tcp::socket writer{io};
  tcp::socket reader{io};

  SocketPair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    writer.connect(acceptor.local_endpoint());
    reader = acceptor.accept();
  }

  // Reads until `bytes` arrived (blocking: the writer's part is done or runs on `io`).
  std::string read_exactly(std::size_t bytes) {
    std::string got(bytes, '\0');
    asio::read(reader, asio::buffer(got));
    return got;
  }
};

std::string pattern(std::size_t bytes) {
  std::string text(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) text[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  return text;
}

TEST(WriteNowTest, ASmallGatherWriteGoesOutWholeAtOnce) {
  SocketPair pair;
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
  const std::string body = "hello";
  std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
  beast::error_code ec;
  const std::size_t sent = write_now(pair.writer, buffers, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(sent, head.size() + body.size());
  EXPECT_FALSE(write_pending(buffers, sent, ec));
  EXPECT_TRUE(pair.writer.non_blocking()) << "set once, so a full buffer can never block the thread";
  EXPECT_EQ(pair.read_exactly(sent), head + body);
}

// A reader that does not keep up fills the socket buffers: write_now() returns what the kernel
// took, without an error and without blocking, and write_rest() delivers the rest in order.
TEST(WriteNowTest, AFullSendBufferLeavesTheRestToWriteRestInOrder) {
  SocketPair pair;
  pair.writer.set_option(asio::socket_base::send_buffer_size(64 * 1024));
  pair.reader.set_option(asio::socket_base::receive_buffer_size(64 * 1024));
  const std::string head = pattern(1000);
  const std::string body = pattern(4 << 20);  // far more than both buffers hold
  std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
  beast::error_code ec;
  const std::size_t sent = write_now(pair.writer, buffers, ec);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_GT(sent, 0u);
  ASSERT_LT(sent, head.size() + body.size());
  ASSERT_TRUE(write_pending(buffers, sent, ec));

  std::size_t rest = 0;
  beast::error_code rest_ec;
  asio::co_spawn(
      pair.io,
      [&]() -> awaitable<void> { rest = co_await write_rest(pair.writer, buffers, sent, rest_ec); },
      asio::detached);
  std::thread runner([&] { pair.io.run(); });
  const std::string got = pair.read_exactly(head.size() + body.size());
  runner.join();
  EXPECT_FALSE(rest_ec) << rest_ec.message();
  EXPECT_EQ(sent + rest, head.size() + body.size());
  EXPECT_TRUE(got == head + body) << "the bytes arrive whole and in order";
}

// A peer that went away is an error, not a full buffer: the caller gives up at once.
TEST(WriteNowTest, APeerThatClosedIsAnErrorNotAPendingWrite) {
  SocketPair pair;
  pair.reader.close();
  const std::string text = pattern(64 * 1024);
  beast::error_code ec;
  // The first send may still be taken by the kernel; the peer's reset fails a later one.
  for (int attempt = 0; attempt < 100 && !ec; ++attempt) write_now(pair.writer, asio::buffer(text), ec);
  ASSERT_TRUE(ec);
  EXPECT_NE(ec, asio::error::would_block);
  EXPECT_FALSE(write_pending(asio::buffer(text), 0, ec));
}

}  // namespace
}  // namespace hengshi
