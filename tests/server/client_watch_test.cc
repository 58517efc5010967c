// The client-gone watch is armed one delay after a request asks, only while the request still
// waits and its connection lives; once armed, a client that closes cancels the request's token.
// Real sockets on 127.0.0.1. Every test runs the io_context until it has no work left, so a
// watch that was armed (a pending receive that the close completes) would show.
#include "server/client_watch.h"

#include <chrono>
#include <memory>
#include <vector>

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

// One client and its watch, an arming with a 1 ms delay; tests run io_ until it has no work.
class ClientWatchTest : public ::testing::Test {
 protected:
  // The handler is about to wait: the watch is wanted (the first time) and queued.
  void ask(Watched& watched) {
    ASSERT_TRUE(watched.watch->want());
    arming_.add(watched.watch);
  }

  asio::io_context io_;
  SocketPair sockets_{io_};
  Watched watched_{sockets_};
  ClientWatchArming arming_{io_, std::chrono::milliseconds(1)};
};

TEST_F(ClientWatchTest, ArmedAfterTheDelayItSeesTheClientLeave) {
  ask(watched_);
  sockets_.client.close();
  io_.run();
  EXPECT_TRUE(watched_.cancelled);
}

TEST_F(ClientWatchTest, APipelinedRequestEndsTheWatchWithoutCancelling) {
  ask(watched_);
  asio::write(sockets_.client, asio::buffer(std::string_view("POST /")));
  io_.run();  // the peek completes with the byte; nothing else is pending
  EXPECT_FALSE(watched_.cancelled);
  char byte = 0;
  EXPECT_EQ(sockets_.server.read_some(asio::buffer(&byte, 1)), 1u) << "the peek must leave the bytes";
  EXPECT_EQ(byte, 'P');
}

TEST_F(ClientWatchTest, IsWantedOnceAndNotAfterItEnded) {
  EXPECT_TRUE(watched_.watch->want());
  EXPECT_FALSE(watched_.watch->want());
  Watched second(sockets_);
  second.watch->end();
  EXPECT_FALSE(second.watch->want());
}

TEST_F(ClientWatchTest, AWatchThatEndedBeforeTheDelayIsNeverArmed) {
  ask(watched_);
  watched_.watch->end();  // the answer went out within the delay
  sockets_.client.close();
  io_.run();  // returns once the tick dropped the watch: no receive was started
  EXPECT_FALSE(watched_.cancelled);
}

TEST_F(ClientWatchTest, AWatchWhoseConnectionEndedIsNeverArmed) {
  ask(watched_);
  watched_.connection.reset();
  sockets_.client.close();
  io_.run();
  EXPECT_FALSE(watched_.cancelled);
}

TEST_F(ClientWatchTest, StoppedArmingDropsItsWatches) {
  ask(watched_);
  arming_.stop();
  sockets_.client.close();
  io_.run();
  EXPECT_FALSE(watched_.cancelled);
}

TEST_F(ClientWatchTest, AWatchAddedAfterTheTimerWentIdleIsArmedToo) {
  SocketPair second_sockets(io_);
  Watched second(second_sockets);
  // The second asks once the first was armed and saw its client leave: by then the arming had
  // nothing pending and its timer had stopped.
  auto registration = watched_.token.on_cancel([&] {
    ask(second);
    second_sockets.client.close();
  });
  ask(watched_);
  sockets_.client.close();
  io_.run();
  EXPECT_TRUE(watched_.cancelled);
  EXPECT_TRUE(second.cancelled);
}

TEST_F(ClientWatchTest, ManyWatchesAddedAtOnceAreAllArmed) {
  std::vector<std::unique_ptr<SocketPair>> sockets;
  std::vector<std::unique_ptr<Watched>> watched;
  for (int i = 0; i < 8; ++i) {
    sockets.push_back(std::make_unique<SocketPair>(io_));
    watched.push_back(std::make_unique<Watched>(*sockets.back()));
    ask(*watched.back());
    sockets.back()->client.close();
  }
  io_.run();
  for (const auto& each : watched) EXPECT_TRUE(each->cancelled);
}

}  // namespace
}  // namespace hengshi::server
