#include "sim/sim_server.h"

#include <atomic>
#include <ctime>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "core/api_error.h"
#include "core/chat_request.h"
#include "sim/chat_response.h"
#include "sim/request_plan.h"

namespace hengshi::sim {

struct SimServerState {
  SimServerState(asio::io_context& io, SimOptions opts, Profile initial)
      : options(std::move(opts)),
        acceptor(asio::make_strand(io)),
        profile(std::make_shared<const Profile>(std::move(initial))) {}

  std::shared_ptr<const Profile> current_profile() const {
    std::lock_guard lock(profile_mutex);
    return profile;
  }
  void replace_profile(Profile next) {
    auto shared = std::make_shared<const Profile>(std::move(next));
    std::lock_guard lock(profile_mutex);
    profile = std::move(shared);
  }

  const SimOptions options;
  tcp::acceptor acceptor;
  SimStats stats;
  std::atomic<std::uint64_t> next_request_index{0};

  mutable std::mutex profile_mutex;
  std::shared_ptr<const Profile> profile;
};

namespace {

using State = SimServerState;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kWatchReadBytes = 4096;
constexpr std::size_t kMaxPendingBytes = 1 << 20;  // stop watching a client that floods us

// Waits `duration` while watching the socket, so a client that goes away is noticed at once
// rather than at the next write. Bytes that arrive meanwhile (a pipelined request) are kept in
// `buffer` for the next read. Returns true when the client closed or reset the connection.
// Boost 1.74 has no awaitable operators, so the race is a plain read whose handler cancels the
// timer; when the timer wins, the read is cancelled and its handler awaited before returning.
awaitable<bool> wait_watching_client(beast::tcp_stream& stream, beast::flat_buffer& buffer,
                                     Clock::duration duration) {
  const auto deadline = Clock::now() + duration;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  struct Watch {
    bool done = false;
    beast::error_code error;
    std::size_t bytes = 0;
  };
  while (Clock::now() < deadline) {
    timer.expires_at(deadline);
    auto watch = std::make_shared<Watch>();
    bool watching = buffer.size() < kMaxPendingBytes;
    if (watching) {
      stream.socket().async_read_some(buffer.prepare(kWatchReadBytes),
                                      [watch, &timer](beast::error_code error, std::size_t bytes) {
                                        watch->done = true;
                                        watch->error = error;
                                        watch->bytes = bytes;
                                        timer.cancel();
                                      });
    }
    beast::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ignored));
    if (!watching) continue;
    if (!watch->done) {  // the timer won: stop the read and wait for its handler to run
      stream.socket().cancel(ignored);
      timer.expires_at(Clock::time_point::max());
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ignored));
    }
    buffer.commit(watch->bytes);
    if (watch->error && watch->error != asio::error::operation_aborted) co_return true;
  }
  co_return false;
}

std::string_view path_of(beast::string_view boost_target) {
  std::string_view target(boost_target.data(), boost_target.size());
  auto query = target.find('?');
  return query == std::string_view::npos ? target : target.substr(0, query);
}

// One connection: read a request, answer it, repeat while keep-alive holds.
class Connection {
 public:
  Connection(std::shared_ptr<State> state, beast::tcp_stream stream)
      : state_(std::move(state)), stream_(std::move(stream)) {}

  awaitable<void> run() {
    state_->stats.on_connection_accepted();
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(state_->options.max_body_bytes);
      beast::error_code error;
      stream_.expires_after(state_->options.idle_timeout);
      co_await http::async_read(stream_, buffer_, parser,
                                asio::redirect_error(use_awaitable, error));
      if (error) {
        co_await answer_read_error(error, parser.get().version());
        break;
      }
      request_ = parser.release();
      if (!co_await dispatch()) break;
    }
    close();
  }

 private:
  // Returns whether to keep the connection for another request.
  awaitable<bool> dispatch() {
    std::string_view path = path_of(request_.target());
    http::verb method = request_.method();
    if (path == "/v1/chat/completions") {
      if (method == http::verb::post) co_return co_await chat();
    } else if (path == "/v1/models") {
      if (method == http::verb::get) co_return co_await write_json(http::status::ok, models_body());
    } else if (path == "/healthz") {
      if (method == http::verb::get) {
        co_return co_await write_json(http::status::ok, R"({"status":"ok"})");
      }
    } else if (path == "/admin/profile") {
      if (method == http::verb::get) {
        co_return co_await write_json(http::status::ok,
                                      state_->current_profile()->to_json().dump());
      }
      if (method == http::verb::post) co_return co_await replace_profile();
    } else if (path == "/admin/stats") {
      if (method == http::verb::get) {
        co_return co_await write_json(http::status::ok, state_->stats.to_json().dump());
      }
    } else if (path == "/admin/reset") {
      if (method == http::verb::post) {
        state_->stats.reset();
        state_->next_request_index.store(0);
        co_return co_await write_json(http::status::ok, R"({"reset":true})");
      }
    } else {
      state_->stats.on_bad_request();
      co_return co_await write_error(ApiError::not_found("no route for " + std::string(path)));
    }
    state_->stats.on_bad_request();
    co_return co_await write_error(ApiError::method_not_allowed(
        std::string(request_.method_string()) + " is not allowed on " + std::string(path)));
  }

  awaitable<bool> chat() {
    auto parsed = parse_chat_request(request_.body());
    if (!parsed) {
      state_->stats.on_bad_request();
      co_return co_await write_error(parsed.error());
    }
    const ChatRequest& chat_request = *parsed;
    if (chat_request.model.empty()) {
      state_->stats.on_bad_request();
      co_return co_await write_error(
          ApiError::invalid_request("missing_required_parameter", "model is required", "model"));
    }

    std::uint64_t index = state_->next_request_index.fetch_add(1, std::memory_order_relaxed);
    auto profile = state_->current_profile();
    RequestPlan plan =
        plan_request(profile->for_model(chat_request.model), state_->options.seed, index,
                     chat_request.stream, parse_markers(chat_request.last_user_text()));
    state_->stats.on_chat_request(chat_request.model, chat_request.stream, plan.outcome);
    state_->stats.on_chat_started();
    struct InFlight {
      SimStats& stats;
      ~InFlight() { stats.on_chat_finished(); }
    } in_flight{state_->stats};

    if (plan.outcome == Outcome::kHang) {
      if (co_await wait_watching_client(stream_, buffer_, state_->options.idle_timeout)) {
        state_->stats.on_client_disconnect();
      }
      co_return false;
    }
    if (plan.delay_ms > 0 &&
        co_await wait_watching_client(stream_, buffer_, std::chrono::milliseconds(plan.delay_ms))) {
      state_->stats.on_client_disconnect();
      co_return false;
    }
    const std::string_view name = state_->options.name;
    switch (plan.outcome) {
      case Outcome::kError:
        co_return co_await write_error(injected_server_error(name));
      case Outcome::kRateLimit:
        co_return co_await write_error(injected_rate_limit(name, plan.retry_after_s),
                                       std::to_string(plan.retry_after_s));
      case Outcome::kGarbage:
        if (!chat_request.stream) {
          co_return co_await write_json(http::status::ok, std::string(garbage_body()));
        }
        break;
      default:
        break;
    }

    ReplyIdentity identity{name, chat_request.model, index,
                           static_cast<std::int64_t>(std::time(nullptr))};
    Completion completion = make_completion(name, chat_request, plan);
    if (chat_request.stream) {
      co_return co_await stream_completion(identity, completion, plan, chat_request.include_usage);
    }
    std::string body = completion_body(identity, completion);
    if (plan.outcome == Outcome::kDisconnect) {
      co_await write_half_and_drop(std::move(body));
      co_return false;
    }
    co_return co_await write_json(http::status::ok, std::move(body));
  }

  awaitable<bool> stream_completion(const ReplyIdentity& identity, const Completion& completion,
                                    const RequestPlan& plan, bool include_usage) {
    std::vector<SseEvent> events =
        stream_events(identity, completion, include_usage, plan.outcome == Outcome::kGarbage);
    // A disconnect stops before [DONE], always, so the drop is visible to the client.
    std::size_t send_count = events.size();
    bool drop = plan.outcome == Outcome::kDisconnect;
    if (drop) {
      send_count =
          std::min(static_cast<std::size_t>(plan.disconnect_after_chunks), events.size() - 1);
    }

    http::response<http::empty_body> head{http::status::ok, request_.version()};
    set_common_headers(head);
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    head.chunked(true);
    head.keep_alive(request_.keep_alive());
    http::response_serializer<http::empty_body> serializer{head};
    beast::error_code error;
    stream_.expires_after(state_->options.idle_timeout);
    co_await http::async_write_header(stream_, serializer,
                                      asio::redirect_error(use_awaitable, error));
    if (error) co_return client_gone(error);

    // Events go out in batches: everything up to the next paced token is one HTTP chunk.
    std::string batch;
    for (std::size_t i = 0; i < send_count; ++i) {
      if (events[i].paced && plan.token_interval_us > 0 && !batch.empty()) {
        if (!co_await write_chunk(batch)) co_return false;
        batch.clear();
        if (co_await wait_watching_client(stream_, buffer_,
                                          std::chrono::microseconds(plan.token_interval_us))) {
          state_->stats.on_client_disconnect();
          co_return false;
        }
      }
      batch += events[i].text;
    }
    if (!batch.empty() && !co_await write_chunk(batch)) co_return false;
    if (drop) co_return false;
    stream_.expires_after(state_->options.idle_timeout);
    co_await asio::async_write(stream_, http::make_chunk_last(),
                               asio::redirect_error(use_awaitable, error));
    if (error) co_return client_gone(error);
    co_return request_.keep_alive();
  }

  awaitable<bool> write_chunk(const std::string& data) {
    beast::error_code error;
    stream_.expires_after(state_->options.idle_timeout);
    co_await asio::async_write(stream_, http::make_chunk(asio::buffer(data)),
                               asio::redirect_error(use_awaitable, error));
    if (error) co_return client_gone(error);
    co_return true;
  }

  // Non-stream disconnect: the headers promise the whole body, half of it arrives, then EOF.
  awaitable<void> write_half_and_drop(std::string body) {
    http::response<http::string_body> response{http::status::ok, request_.version()};
    set_common_headers(response);
    response.set(http::field::content_type, "application/json");
    response.body() = std::move(body);
    response.prepare_payload();
    http::response_serializer<http::string_body> serializer{response};
    beast::error_code error;
    stream_.expires_after(state_->options.idle_timeout);
    co_await http::async_write_header(stream_, serializer,
                                      asio::redirect_error(use_awaitable, error));
    if (error) {
      client_gone(error);
      co_return;
    }
    const std::string& full = response.body();
    co_await asio::async_write(stream_, asio::buffer(full.data(), full.size() / 2),
                               asio::redirect_error(use_awaitable, error));
    if (error) client_gone(error);
  }

  awaitable<bool> write_json(http::status status, std::string body,
                             std::string retry_after_s = {}) {
    http::response<http::string_body> response{status, request_.version()};
    set_common_headers(response);
    response.set(http::field::content_type, "application/json");
    if (!retry_after_s.empty()) response.set(http::field::retry_after, retry_after_s);
    response.keep_alive(request_.keep_alive());
    response.body() = std::move(body);
    response.prepare_payload();
    beast::error_code error;
    stream_.expires_after(state_->options.idle_timeout);
    co_await http::async_write(stream_, response, asio::redirect_error(use_awaitable, error));
    if (error) co_return client_gone(error);
    co_return response.keep_alive();
  }

  awaitable<bool> write_error(const ApiError& api_error, std::string retry_after_s = {}) {
    return write_json(static_cast<http::status>(api_error.status), api_error.body(),
                      std::move(retry_after_s));
  }

  awaitable<bool> replace_profile() {
    auto profile = parse_profile_json_text(request_.body(), "POST /admin/profile");
    if (!profile) {
      co_return co_await write_error(
          ApiError::invalid_request(profile.error().code, profile.error().message));
    }
    std::string body = profile->to_json().dump();
    state_->replace_profile(std::move(*profile));
    co_return co_await write_json(http::status::ok, std::move(body));
  }

  // A request that could not be read: answer what HTTP allows, then the caller closes.
  awaitable<void> answer_read_error(const beast::error_code& error, unsigned version) {
    if (error == http::error::body_limit) {
      request_ = {};
      request_.version(version);
      request_.keep_alive(false);
      co_await write_error(ApiError::payload_too_large(
          "request body exceeds " + std::to_string(state_->options.max_body_bytes) + " bytes"));
    } else if (error.category() == http::make_error_code(http::error::bad_target).category() &&
               error != http::error::end_of_stream && error != http::error::partial_message) {
      request_ = {};
      request_.version(version == 0 ? 11 : version);
      request_.keep_alive(false);
      co_await write_error(
          ApiError::invalid_request("bad_http", "malformed HTTP request: " + error.message()));
    }
  }

  std::string models_body() const {
    nlohmann::json data = nlohmann::json::array();
    auto profile = state_->current_profile();
    auto add = [&data](const std::string& id) {
      data.push_back(
          {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "hengshi-sim"}});
    };
    for (const auto& [model, behaviour] : profile->models) add(model);
    if (profile->models.empty()) add("hengshi-sim");
    return nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump();
  }

  template <typename Message>
  void set_common_headers(Message& message) const {
    message.set(http::field::server, "hengshi-sim");
    message.set("X-Sim-Name", state_->options.name);
  }

  // A write failed: the client went away (or stalled past the idle timeout).
  bool client_gone(const beast::error_code& error) {
    if (error != beast::error::timeout) state_->stats.on_client_disconnect();
    return false;
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  std::shared_ptr<State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;  // lives as long as the connection: one allocation, reused
  http::request<http::string_body> request_;
};

awaitable<void> serve_connection(std::shared_ptr<State> state, tcp::socket socket) {
  try {
    Connection connection(std::move(state), beast::tcp_stream(std::move(socket)));
    co_await connection.run();
  } catch (const std::exception&) {
    // A connection's failure ends that connection only.
  }
}

awaitable<void> accept_loop(std::shared_ptr<State> state) {
  asio::steady_timer backoff(co_await asio::this_coro::executor);
  while (state->acceptor.is_open()) {
    // Each connection gets its own strand, so --threads N serves connections in parallel.
    tcp::socket socket(asio::make_strand(state->acceptor.get_executor()));
    beast::error_code error;
    co_await state->acceptor.async_accept(socket, asio::redirect_error(use_awaitable, error));
    if (error == asio::error::operation_aborted || !state->acceptor.is_open()) break;
    if (error) {  // e.g. out of descriptors: back off instead of spinning
      backoff.expires_after(std::chrono::milliseconds(10));
      co_await backoff.async_wait(asio::redirect_error(use_awaitable, error));
      continue;
    }
    socket.set_option(tcp::no_delay(true), error);
    auto executor = socket.get_executor();
    asio::co_spawn(executor, serve_connection(state, std::move(socket)), asio::detached);
  }
}

}  // namespace

SimServer::SimServer(asio::io_context& io, SimOptions options, Profile profile)
    : state_(std::make_shared<SimServerState>(io, std::move(options), std::move(profile))) {}

Result<tcp::endpoint> SimServer::listen(const tcp::endpoint& endpoint) {
  beast::error_code error;
  auto fail = [&](const char* step) {
    return Error{"listen_failed", std::string(step) + " " + endpoint.address().to_string() + ":" +
                                      std::to_string(endpoint.port()) + ": " + error.message()};
  };
  tcp::acceptor& acceptor = state_->acceptor;
  acceptor.open(endpoint.protocol(), error);
  if (error) return fail("open");
  acceptor.set_option(asio::socket_base::reuse_address(true), error);
  acceptor.bind(endpoint, error);
  if (error) return fail("bind");
  acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) return fail("listen");
  tcp::endpoint bound = acceptor.local_endpoint(error);
  if (error) return fail("local_endpoint");
  asio::co_spawn(acceptor.get_executor(), accept_loop(state_), asio::detached);
  return bound;
}

void SimServer::stop() {
  auto state = state_;
  asio::post(state->acceptor.get_executor(), [state] {
    beast::error_code ignored;
    state->acceptor.close(ignored);
  });
}

void SimServer::set_profile(Profile profile) { state_->replace_profile(std::move(profile)); }

std::shared_ptr<const Profile> SimServer::profile() const { return state_->current_profile(); }

const SimStats& SimServer::stats() const { return state_->stats; }

void SimServer::reset() {
  state_->stats.reset();
  state_->next_request_index.store(0);
}

}  // namespace hengshi::sim
