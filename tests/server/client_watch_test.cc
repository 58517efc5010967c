// The client-gone watch is armed one delay after a request asks, only while the request still
// waits and its connection lives; once armed, a client that closes cancels the request's token.
// Real sockets on 127.0.0.1. Every test runs the io_context until it has no work left, so a
// watch that was armed (a pending receive that the close completes) would show.
#include "server/client_watch.h"

#include <chrono>
#include <memory>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

namespace hengshi::server {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

struct SocketPair {
  explicit SocketPair(asio::io_context& io) : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
                                              client(io), server(io) {
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }
  tcp::acceptor acceptor;
  tcp::socket client;
  tcp::socket server;
};

struct Watched {
  explicit Watched(SocketPair& sockets) : watch(std::make_shared<ClientWatch>(token, sockets.server, connection)) {
    registration = token.on_cancel([this] { cancelled = true; });
  }
  CancelToken token;
  std::shared_ptr<int> connection = std::make_shared<int>(0);
  bool cancelled = false;
  CancelToken::Registration registration;
  std::shared_ptr<ClientWatch> watch;
};

TEST(ClientWatchTest, ArmedAfterTheDelayItSeesTheClientLeave) {
  asio::io_context io;
  SocketPair sockets(io);
  Watched watched(sockets);
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  ASSERT_TRUE(watched.watch->want());
  arming.add(watched.watch);
  sockets.client.close();
  io.run();
  EXPECT_TRUE(watched.cancelled);
}

TEST(ClientWatchTest, APipelinedRequestEndsTheWatchWithoutCancelling) {
  asio::io_context io;
  SocketPair sockets(io);
  Watched watched(sockets);
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  ASSERT_TRUE(watched.watch->want());
  arming.add(watched.watch);
  asio::write(sockets.client, asio::buffer(std::string_view("POST /")));
  io.run();  // the peek completes with the byte; nothing else is pending
  EXPECT_FALSE(watched.cancelled);
  char byte = 0;
  EXPECT_EQ(sockets.server.read_some(asio::buffer(&byte, 1)), 1u) << "the peek must leave the bytes";
  EXPECT_EQ(byte, 'P');
}

TEST(ClientWatchTest, IsWantedOnceAndNotAfterItEnded) {
  asio::io_context io;
  SocketPair sockets(io);
  Watched first(sockets);
  EXPECT_TRUE(first.watch->want());
  EXPECT_FALSE(first.watch->want());
  Watched second(sockets);
  second.watch->end();
  EXPECT_FALSE(second.watch->want());
}

TEST(ClientWatchTest, AWatchThatEndedBeforeTheDelayIsNeverArmed) {
  asio::io_context io;
  SocketPair sockets(io);
  Watched watched(sockets);
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  ASSERT_TRUE(watched.watch->want());
  arming.add(watched.watch);
  watched.watch->end();  // the answer went out within the delay
  sockets.client.close();
  io.run();  // returns once the tick dropped the watch: no receive was started
  EXPECT_FALSE(watched.cancelled);
}

TEST(ClientWatchTest, AWatchWhoseConnectionEndedIsNeverArmed) {
  asio::io_context io;
  SocketPair sockets(io);
  Watched watched(sockets);
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  ASSERT_TRUE(watched.watch->want());
  arming.add(watched.watch);
  watched.connection.reset();
  sockets.client.close();
  io.run();
  EXPECT_FALSE(watched.cancelled);
}

TEST(ClientWatchTest, StoppedArmingDropsItsWatches) {
  asio::io_context io;
  SocketPair sockets(io);
  Watched watched(sockets);
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  ASSERT_TRUE(watched.watch->want());
  arming.add(watched.watch);
  arming.stop();
  sockets.client.close();
  io.run();
  EXPECT_FALSE(watched.cancelled);
}

TEST(ClientWatchTest, AWatchAddedAfterTheTimerWentIdleIsArmedToo) {
  asio::io_context io;
  SocketPair first_sockets(io);
  SocketPair second_sockets(io);
  Watched first(first_sockets);
  Watched second(second_sockets);
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  // The second asks once the first was armed and saw its client leave: by then the arming had
  // nothing pending and its timer had stopped.
  auto registration = first.token.on_cancel([&] {
    ASSERT_TRUE(second.watch->want());
    arming.add(second.watch);
    second_sockets.client.close();
  });
  ASSERT_TRUE(first.watch->want());
  arming.add(first.watch);
  first_sockets.client.close();
  io.run();
  EXPECT_TRUE(first.cancelled);
  EXPECT_TRUE(second.cancelled);
}

TEST(ClientWatchTest, ManyWatchesAddedAtOnceAreAllArmed) {
  asio::io_context io;
  std::vector<std::unique_ptr<SocketPair>> sockets;
  std::vector<std::unique_ptr<Watched>> watched;
  ClientWatchArming arming(io, std::chrono::milliseconds(1));
  for (int i = 0; i < 8; ++i) {
    sockets.push_back(std::make_unique<SocketPair>(io));
    watched.push_back(std::make_unique<Watched>(*sockets.back()));
    ASSERT_TRUE(watched.back()->watch->want());
    arming.add(watched.back()->watch);
    sockets.back()->client.close();
  }
  io.run();
  for (const auto& each : watched) EXPECT_TRUE(each->cancelled);
}

}  // namespace
}  // namespace hengshi::server
