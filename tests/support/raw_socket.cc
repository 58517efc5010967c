#include "support/raw_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace hengshi::testing {
namespace {

sockaddr_in address_of(const std::string& ip, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, ip.c_str(), &address.sin_addr) != 1) {
    throw std::runtime_error("bad IPv4 address " + ip);
  }
  return address;
}

}  // namespace

RawSocket::RawSocket(const std::string& host, int port, const std::string& source_ip) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  if (!source_ip.empty()) {
    sockaddr_in source = address_of(source_ip, 0);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
      std::string why = std::strerror(errno);
      ::close(fd_);
      throw std::runtime_error("bind " + source_ip + ": " + why);
    }
  }
  sockaddr_in target = address_of(host, port);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
    const int error = errno;
    ::close(fd_);
    // A system_error, so a test can tell a reset (a cap closing at accept) from other failures.
    throw std::system_error(error, std::generic_category(), "connect");
  }
}

RawSocket::~RawSocket() {
  if (fd_ >= 0) ::close(fd_);
}

RawSocket::RawSocket(RawSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

bool RawSocket::send(const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

std::string RawSocket::receive(std::chrono::milliseconds timeout, std::size_t max_bytes) {
  std::string out;
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  char buffer[16 * 1024];
  while (out.size() < max_bytes) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd poll_fd{fd_, POLLIN, 0};
    int ready = ::poll(&poll_fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

bool RawSocket::closed_by_peer(std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  for (;;) {
    // At least one poll, also with a zero timeout (a close that already arrived counts).
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    pollfd poll_fd{fd_, POLLIN, 0};
    int ready = ::poll(&poll_fd, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
}

void RawSocket::set_receive_buffer(int bytes) {
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

long resident_kib(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

}  // namespace hengshi::testing
