// bench_loadgen: an open-loop HTTP load generator at a fixed request rate (wrk in Debian is
// closed-loop, which hides queueing: coordinated omission). Request k is due at start + k/rate;
// its latency is measured from that due time, so a stalled server shows up in the tail.
//
//   bench_loadgen --url http://127.0.0.1:PORT/v1/chat/completions --rate 2000 --seconds 10
//                 --connections 64 --body FILE [--header 'Name: value'] [--warmup-seconds 2]
//   bench_loadgen --hold HOST:PORT --connections 1000 --seconds 3   (open idle connections)
//
// Prints one JSON object: achieved rps, latency percentiles in µs (whole answer, and time to the
// first body byte: a stream's TTFT), errors.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/asio.h"
#include "core/url.h"

namespace {

using hengshi::asio::awaitable;
using Clock = std::chrono::steady_clock;
namespace asio = hengshi::asio;
namespace beast = hengshi::beast;
namespace http = hengshi::http;
using hengshi::tcp;
using hengshi::use_awaitable;

struct Run {
  Clock::time_point start;
  Clock::time_point end;
  Clock::time_point measure_from;  // after warm-up
  std::chrono::nanoseconds interval;
  std::uint64_t next_slot = 0;
  std::vector<std::int64_t> latencies_us;
  std::vector<std::int64_t> first_byte_us;  // time to the first body byte (TTFT of a stream)
  std::vector<std::pair<std::string, std::string>> headers;
  std::uint64_t errors = 0;
  std::uint64_t non_200 = 0;
  std::uint64_t completed = 0;
};

awaitable<void> connection_loop(Run& run, tcp::endpoint endpoint, std::string host,
                                std::string target, std::string body) {  // by value: coroutine
  auto executor = co_await asio::this_coro::executor;
  beast::tcp_stream stream(executor);
  beast::error_code ec;
  co_await stream.async_connect(endpoint, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    ++run.errors;
    co_return;
  }
  stream.socket().set_option(tcp::no_delay(true));
  http::request<http::string_body> request{http::verb::post, target, 11};
  request.set(http::field::host, host);
  request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : run.headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  beast::flat_buffer buffer;
  asio::steady_timer timer(executor);
  while (true) {
    Clock::time_point due = run.start + run.interval * run.next_slot++;
    if (due >= run.end) break;
    if (due > Clock::now()) {
      timer.expires_at(due);
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    stream.expires_after(std::chrono::seconds(30));
    co_await http::async_write(stream, request, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      ++run.errors;
      break;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    while (!ec && !parser.is_done() && parser.get().body().empty()) {
      co_await http::async_read_some(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    }
    auto first_byte = Clock::now();
    if (!ec && !parser.is_done()) {
      co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    }
    if (ec) {
      if (run.errors == 0) std::cerr << "first error: " << ec.message() << "\n";
      ++run.errors;
      break;
    }
    auto done = Clock::now();
    const auto& response = parser.get();
    if (response.result_int() != 200) {
      if (run.non_200++ == 0) {
        std::cerr << "first non-200 answer: " << response.result_int() << " " << response.body() << "\n";
      }
    }
    if (due >= run.measure_from) {
      ++run.completed;
      run.latencies_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(done - due).count());
      run.first_byte_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(first_byte - due).count());
    }
  }
}

std::int64_t percentile(std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return sorted[index];
}

int hold_connections(const std::string& host_port, int connections, double seconds) {
  asio::io_context io;
  auto colon = host_port.rfind(':');
  tcp::endpoint endpoint(asio::ip::make_address(host_port.substr(0, colon)),
                         static_cast<unsigned short>(std::stoi(host_port.substr(colon + 1))));
  std::vector<std::unique_ptr<tcp::socket>> sockets;
  int opened = 0;
  for (int i = 0; i < connections; ++i) {
    auto socket = std::make_unique<tcp::socket>(io);
    beast::error_code ec;
    socket->connect(endpoint, ec);
    if (!ec) {
      // One request per connection so the server has really set each one up.
      std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
      asio::write(*socket, asio::buffer(request), ec);
      ++opened;
    }
    sockets.push_back(std::move(socket));
  }
  // Read every reply so the server has served all of them before we report.
  int answered = 0;
  for (auto& socket : sockets) {
    if (!socket->is_open()) continue;
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    beast::error_code ec;
    http::read(*socket, buffer, response, ec);
    if (!ec) ++answered;
  }
  std::cout << nlohmann::json{{"opened", opened}, {"answered", answered}}.dump() << std::endl;
  // Keep them open for the caller to sample the server's memory, then close.
  asio::steady_timer timer(io, std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
  timer.wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"open-loop fixed-rate HTTP load generator"};
  std::string url;
  std::string body_file;
  std::string hold;
  double rate = 1000;
  double seconds = 10;
  double warmup_seconds = 2;
  int connections = 64;
  app.add_option("--url", url, "POST target");
  app.add_option("--body", body_file, "request body file");
  app.add_option("--rate", rate, "requests per second");
  app.add_option("--seconds", seconds, "measured duration");
  app.add_option("--warmup-seconds", warmup_seconds, "unmeasured warm-up");
  app.add_option("--connections", connections, "keep-alive connections");
  std::vector<std::string> headers;
  app.add_option("--header", headers, "extra request header 'Name: value' (repeatable)");
  app.add_option("--hold", hold, "HOST:PORT: open --connections idle connections and hold them");
  CLI11_PARSE(app, argc, argv);

  if (!hold.empty()) return hold_connections(hold, connections, seconds);

  auto parsed = hengshi::parse_url(url);
  if (!parsed) {
    std::cerr << parsed.error().message << "\n";
    return 2;
  }
  std::ifstream in(body_file);
  std::stringstream body;
  body << in.rdbuf();

  asio::io_context io(1);
  tcp::endpoint endpoint(asio::ip::make_address(parsed->host),
                         static_cast<unsigned short>(std::stoi(parsed->port)));
  Run run;
  for (const auto& header : headers) {
    auto colon = header.find(':');
    if (colon == std::string::npos) {
      std::cerr << "--header wants 'Name: value', got " << header << "\n";
      return 2;
    }
    auto value = header.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    run.headers.emplace_back(header.substr(0, colon), value);
  }
  run.interval = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / rate));
  run.start = Clock::now() + std::chrono::milliseconds(50);
  run.measure_from = run.start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(warmup_seconds));
  run.end = run.measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  run.latencies_us.reserve(static_cast<std::size_t>(rate * seconds * 1.1));
  std::string target = parsed->path.empty() ? "/" : parsed->path;
  for (int i = 0; i < connections; ++i) {
    asio::co_spawn(io, connection_loop(run, endpoint, parsed->host, target, body.str()), asio::detached);
  }
  io.run();
  auto finished = Clock::now();
  std::sort(run.latencies_us.begin(), run.latencies_us.end());
  std::sort(run.first_byte_us.begin(), run.first_byte_us.end());
  double measured_s = std::chrono::duration<double>(std::min(finished, run.end + std::chrono::seconds(30)) -
                                                    run.measure_from)
                          .count();
  nlohmann::json out = {
      {"target_rps", rate},
      {"achieved_rps", static_cast<double>(run.completed) / measured_s},
      {"completed", run.completed},
      {"errors", run.errors},
      {"non_200", run.non_200},
      {"p50_us", percentile(run.latencies_us, 0.50)},
      {"p90_us", percentile(run.latencies_us, 0.90)},
      {"p99_us", percentile(run.latencies_us, 0.99)},
      {"max_us", run.latencies_us.empty() ? 0 : run.latencies_us.back()},
      {"first_byte_p50_us", percentile(run.first_byte_us, 0.50)},
      {"first_byte_p99_us", percentile(run.first_byte_us, 0.99)},
  };
  std::cout << out.dump() << std::endl;
  return run.errors == 0 ? 0 : 1;
}
