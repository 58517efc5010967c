// RawSocket: a plain blocking TCP client for tests that must misbehave the way real clients do
// (send bytes a byte at a time, never read, hold thousands of idle connections, connect from
// another loopback address). Every receive is bounded by a timeout.
#pragma once

#include <chrono>
#include <string>

namespace hengshi::testing {

class RawSocket {
 public:
  // Connects to host:port, from `source_ip` when it is not empty (e.g. "127.0.0.2": another
  // peer address on loopback). Throws std::runtime_error when the connection fails.
  RawSocket(const std::string& host, int port, const std::string& source_ip = "");
  ~RawSocket();
  RawSocket(RawSocket&& other) noexcept;
  RawSocket& operator=(RawSocket&&) = delete;
  RawSocket(const RawSocket&) = delete;

  // Writes all of `bytes`; false when the peer is gone.
  bool send(const std::string& bytes);
  // Reads until the peer closes, `timeout` passes, or `max_bytes` arrived.
  std::string receive(std::chrono::milliseconds timeout, std::size_t max_bytes = 1 << 20);
  // True when the peer closed (or reset) the connection within `timeout`.
  bool closed_by_peer(std::chrono::milliseconds timeout);
  // Shrinks the receive buffer so a stalled reader stalls the sender sooner.
  void set_receive_buffer(int bytes);
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Resident set size of a process, in KiB (from /proc/PID/status), or -1.
long resident_kib(int pid);

}  // namespace hengshi::testing
