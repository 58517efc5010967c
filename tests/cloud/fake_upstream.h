// FakeUpstream: an in-process OpenAI-compatible upstream for the cloud tests. A Beast coroutine
// server on 127.0.0.1:0 with its own io_context and thread; the test scripts each request's
// reply (status, body, delay, hang, SSE events, closing early) through a handler, and reads back
// what the server saw: requests, accepted connections, disconnects observed while hanging.
//
// Thread-safety: every public method may be called from the test thread while the server runs.
// The handler runs on the server thread.
#pragma once

#include <chrono>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/asio.h"

#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>

namespace hengshi::cloud::testing {

struct FakeRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct FakeReply {
  int status = 200;
  std::string body;  // empty: a canned chat.completion echoing the request's model
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds delay{0};  // before anything is written
  bool hang = false;  // never answer; wait for the client to disconnect and count it
  std::string raw;    // written as is instead of an HTTP response, then the connection closes
  bool close_after = false;          // close the connection after the reply without announcing it
  bool close_without_reply = false;  // read the request, then close without a byte of reply
  // A non-stream reply written in pieces, cut at these offsets, with `piece_pause` before each
  // piece after the first: a slow upstream, so the client's first read holds only the first piece.
  std::vector<std::size_t> cut_at;
  std::chrono::milliseconds piece_pause{20};

  // Streaming reply (text/event-stream, chunked), used when `stream` is set.
  bool stream = false;
  std::vector<std::string> events;  // data payloads, each written as its own chunk
  bool gated = false;               // event i is written only once release() was called i+1 times
  bool send_done = true;
  bool close_mid_stream = false;  // close right after the events: no [DONE], no terminator
};

// A minimal chat.completion body.
inline std::string completion_body(const std::string& model, const std::string& content = "hi") {
  nlohmann::json body = {
      {"id", "chatcmpl-1"},
      {"object", "chat.completion"},
      {"model", model},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", content}}},
         {"finish_reason", "stop"}}}},
      {"usage", {{"prompt_tokens", 11}, {"completion_tokens", 7}, {"total_tokens", 18}}}};
  return body.dump();
}

class FakeUpstream {
 public:
  enum class Mode {
    http,
    https,   // TLS with `tls` as the server context
    silent,  // accepts connections and never writes a byte (TLS handshakes hang)
  };
  using Handler = std::function<FakeReply(const FakeRequest&)>;

  explicit FakeUpstream(Mode mode = Mode::http, std::shared_ptr<asio::ssl::context> tls = nullptr)
      : mode_(mode),
        tls_(std::move(tls)),
        acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        gate_(ioc_, Clock::time_point::max()) {
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(ioc_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }

  ~FakeUpstream() {
    ioc_.stop();
    thread_.join();
  }

  FakeUpstream(const FakeUpstream&) = delete;
  FakeUpstream& operator=(const FakeUpstream&) = delete;

  unsigned short port() const { return port_; }
  std::string base_url() const {
    return std::string(mode_ == Mode::http ? "http" : "https") +
           "://127.0.0.1:" + std::to_string(port_) + "/v1";
  }

  void set_handler(Handler handler) {
    std::lock_guard lock(mutex_);
    handler_ = std::move(handler);
  }
  // Every request gets the same reply.
  void reply_always(FakeReply reply) {
    set_handler([reply](const FakeRequest&) { return reply; });
  }

  int accepted() const {
    std::lock_guard lock(mutex_);
    return accepted_;
  }
  std::vector<FakeRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // Waits (bounded) until `count` hanging requests saw their client disconnect.
  bool wait_for_disconnects(int count, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return disconnects_ >= count; });
  }
  // Opens the gate of a gated stream for one more event.
  void release() {
    asio::post(ioc_, [this] {
      ++released_;
      gate_.cancel();
    });
  }

 private:
  using Clock = std::chrono::steady_clock;

  awaitable<void> accept_loop() {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      {
        std::lock_guard lock(mutex_);
        ++accepted_;
      }
      asio::co_spawn(ioc_, session(std::move(socket)), asio::detached);
    }
  }

  awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream tcp_stream(std::move(socket));
    if (mode_ == Mode::silent) {
      co_await wait_for_close(tcp_stream);
      co_return;
    }
    if (mode_ == Mode::https) {
      beast::ssl_stream<beast::tcp_stream> tls_stream(std::move(tcp_stream), *tls_);
      beast::error_code ec;
      co_await tls_stream.async_handshake(asio::ssl::stream_base::server,
                                          asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      co_await serve(tls_stream);
    } else {
      co_await serve(tcp_stream);
    }
  }

  template <class Stream>
  awaitable<void> wait_for_close(Stream& stream) {
    char byte = 0;
    beast::error_code ec;
    while (!ec) {
      co_await stream.async_read_some(asio::buffer(&byte, 1),
                                      asio::redirect_error(use_awaitable, ec));
    }
  }

  template <class Stream>
  awaitable<void> serve(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> request;
      beast::error_code ec;
      co_await http::async_read(stream, buffer, request, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      FakeRequest recorded;
      recorded.method = std::string(request.method_string());
      recorded.target = std::string(request.target());
      for (const auto& field : request) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        recorded.headers[name] = std::string(field.value());
      }
      recorded.body = request.body();
      Handler handler;
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(recorded);
        handler = handler_;
      }
      FakeReply reply = handler ? handler(recorded) : FakeReply{};

      if (reply.delay.count() > 0) {
        asio::steady_timer timer(ioc_, reply.delay);
        co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
      }
      if (reply.close_without_reply) {
        beast::get_lowest_layer(stream).close();
        co_return;
      }
      if (reply.hang) {
        co_await wait_for_close(stream);
        {
          std::lock_guard lock(mutex_);
          ++disconnects_;
        }
        changed_.notify_all();
        co_return;
      }
      if (!reply.raw.empty()) {
        co_await write(stream, reply.raw, ec);
        beast::get_lowest_layer(stream).close();
        co_return;
      }
      if (reply.stream) {
        bool open = co_await write_stream(stream, reply);
        if (!open) co_return;
      } else {
        if (reply.body.empty()) {
          auto json = nlohmann::json::parse(recorded.body, nullptr, false);
          std::string model =
              json.is_object() && json.contains("model") && json["model"].is_string()
                  ? json["model"].get<std::string>()
                  : "unknown";
          reply.body = completion_body(model);
        }
        std::string head = "HTTP/1.1 " + std::to_string(reply.status) +
                           " Fake\r\nContent-Type: " + reply.content_type +
                           "\r\nContent-Length: " + std::to_string(reply.body.size()) + "\r\n";
        for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
        const std::string whole = head + "\r\n" + reply.body;
        std::size_t from = 0;
        for (std::size_t cut : reply.cut_at) {
          co_await write(stream, whole.substr(from, cut - from), ec);
          if (ec) co_return;
          asio::steady_timer pause(ioc_, reply.piece_pause);
          co_await pause.async_wait(asio::redirect_error(use_awaitable, ec));
          from = cut;
        }
        co_await write(stream, whole.substr(from), ec);
        if (ec) co_return;
      }
      if (reply.close_after) {
        beast::get_lowest_layer(stream).close();
        co_return;
      }
    }
  }

  // Returns whether the connection stays open for another request.
  template <class Stream>
  awaitable<bool> write_stream(Stream& stream, const FakeReply& reply) {
    beast::error_code ec;
    std::string head = "HTTP/1.1 " + std::to_string(reply.status) +
                       " Fake\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n";
    for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
    co_await write(stream, head + "\r\n", ec);
    if (ec) co_return false;
    for (std::size_t i = 0; i < reply.events.size(); ++i) {
      if (reply.gated) {
        while (released_ < static_cast<int>(i) + 1) {
          gate_.expires_at(Clock::time_point::max());
          co_await gate_.async_wait(asio::redirect_error(use_awaitable, ec));
        }
      }
      co_await write(stream, chunk("data: " + reply.events[i] + "\n\n"), ec);
      if (ec) co_return false;
    }
    if (reply.close_mid_stream) {
      beast::get_lowest_layer(stream).close();
      co_return false;
    }
    std::string tail = reply.send_done ? chunk("data: [DONE]\n\n") : std::string();
    co_await write(stream, tail + "0\r\n\r\n", ec);
    co_return !ec;
  }

  static std::string chunk(const std::string& payload) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
    return size + payload + "\r\n";
  }

  template <class Stream>
  awaitable<void> write(Stream& stream, std::string text, beast::error_code& ec) {
    co_await asio::async_write(stream, asio::buffer(text), asio::redirect_error(use_awaitable, ec));
  }

  Mode mode_;
  std::shared_ptr<asio::ssl::context> tls_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer gate_;
  int released_ = 0;  // server thread only
  unsigned short port_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Handler handler_;
  int accepted_ = 0;
  int disconnects_ = 0;
  std::vector<FakeRequest> requests_;

  std::thread thread_;
};

}  // namespace hengshi::cloud::testing
