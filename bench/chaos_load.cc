#include "chaos_load.h"

#include <cstdio>
#include <sstream>

namespace hengshi::bench {
namespace {

using nlohmann::json;
using hengshi::tcp;
using hengshi::use_awaitable;

json parse_lenient(std::string_view text) { return json::parse(text, nullptr, /*allow_exceptions=*/false); }

// A chat.completion.chunk with a non-empty content delta somewhere in `text` (SSE so far).
bool has_content_piece(const std::string& text) {
  static const std::string key = "\"content\":\"";
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
    const std::size_t next = at + key.size();
    if (next < text.size() && text[next] != '"') return true;
  }
  return false;
}

std::string kind_from_answered_by(const std::string& answered_by) {
  if (answered_by.empty()) return "";
  if (answered_by == "human_handoff") return "handoff";
  if (answered_by == "last_resort_reply" || answered_by == "safe_reply") return "canned";
  return "model";
}

awaitable<void> send_one(tcp::endpoint endpoint, std::string body, bool stream, std::int64_t deadline_ms,
                         std::chrono::milliseconds give_up_after, Clock::time_point due, Outcome& out) {
  auto executor = co_await asio::this_coro::executor;
  beast::tcp_stream socket(executor);
  beast::error_code ec;
  socket.expires_after(give_up_after - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - due));
  auto since_due = [due] {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - due).count();
  };
  auto finish = [&](bool timed_out) {
    out.done = true;
    out.timed_out = timed_out;
    out.latency_us = since_due();
  };
  co_await socket.async_connect(endpoint, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    finish(ec == beast::error::timeout);
    co_return;
  }
  socket.socket().set_option(tcp::no_delay(true), ec);
  http::request<http::string_body> request{http::verb::post, "/v1/chat/completions", 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  request.set("X-Hengshi-Deadline-Ms", std::to_string(deadline_ms));
  request.keep_alive(false);
  request.body() = std::move(body);
  request.prepare_payload();
  co_await http::async_write(socket, request, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    finish(ec == beast::error::timeout);
    co_return;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  co_await http::async_read_header(socket, buffer, parser, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    finish(ec == beast::error::timeout);
    co_return;
  }
  // The body piece by piece, so a stream's first content piece is timed as it arrives.
  while (!parser.is_done()) {
    co_await http::async_read_some(socket, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec) break;
    if (stream && !out.ttft_us && has_content_piece(parser.get().body())) out.ttft_us = since_due();
  }
  finish(ec == beast::error::timeout);
  out.status = static_cast<int>(parser.get().result_int());
  read_response(parser.get().body(), stream, out);
  if (!stream && out.status == 200) out.ttft_us = out.latency_us;
  // The head arrived but the body did not complete: an answer cut short is not valid.
  if (ec && ec != http::error::end_of_stream) out.valid = false;
}

awaitable<void> schedule_all(const std::vector<Planned>& schedule, std::vector<Target*> targets,
                             Clock::time_point start, std::int64_t deadline_ms,
                             std::chrono::milliseconds give_up_after) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  std::vector<tcp::endpoint> endpoints;
  for (Target* target : targets) {
    endpoints.emplace_back(asio::ip::make_address_v4("127.0.0.1"), static_cast<unsigned short>(target->port));
  }
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const Clock::time_point due = start + schedule[i].offset;
    if (due > Clock::now()) {
      timer.expires_at(due);
      beast::error_code ec;
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    for (std::size_t t = 0; t < targets.size(); ++t) {
      asio::co_spawn(executor,
                     send_one(endpoints[t], request_body(schedule[i], targets[t]->model), schedule[i].stream,
                              deadline_ms, give_up_after, due, targets[t]->outcomes[i]),
                     asio::detached);
    }
  }
}

}  // namespace

std::string request_body(const Planned& planned, const std::string& model) {
  json body = {{"model", model},
               {"messages", json::array({{{"role", "user"}, {"content", planned.text}}})},
               {"max_tokens", 64},
               {"stream", planned.stream}};
  if (planned.stream) body["stream_options"] = {{"include_usage", true}};  // what the stream cost
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void read_meta(const json& meta, Outcome& out) {
  if (!meta.is_object()) return;
  if (auto it = meta.find("level"); it != meta.end() && it->is_number_integer()) out.level = it->get<int>();
  if (auto it = meta.find("attempts"); it != meta.end() && it->is_number()) out.attempts = it->get<double>();
  if (auto it = meta.find("offline"); it != meta.end() && it->is_boolean()) out.offline = it->get<bool>();
  if (auto it = meta.find("route"); it != meta.end() && it->is_string()) out.route = it->get<std::string>();
  if (auto it = meta.find("answered_by"); it != meta.end() && it->is_string()) {
    out.answered_by = it->get<std::string>();
  }
  if (auto it = meta.find("committed_after_pieces"); it != meta.end() && it->is_number_integer()) {
    out.committed_after_pieces = it->get<int>();
  }
  if (auto it = meta.find("intent"); it != meta.end() && it->is_string()) out.intent = it->get<std::string>();
  if (auto it = meta.find("cache"); it != meta.end() && it->is_string()) out.cache = it->get<std::string>();
  if (auto it = meta.find("cost"); it != meta.end() && it->is_number()) out.cost = it->get<double>();
  // Gateways from before answer_kind existed: the kind follows from who answered.
  if (auto it = meta.find("answer_kind"); it != meta.end() && it->is_string()) {
    out.kind = it->get<std::string>();
  } else {
    out.kind = kind_from_answered_by(out.answered_by);
  }
  auto hops = meta.find("hops");
  if (hops == meta.end() || !hops->is_array()) return;
  for (const json& hop : *hops) {
    if (!hop.is_object() || !hop.contains("source") || !hop["source"].is_string()) continue;
    const std::string source = hop["source"].get<std::string>();
    if (source != "cloud-small" && source != "cloud-large") continue;
    const json attempts = hop.value("attempts", json::array());
    if (!attempts.is_array()) continue;
    for (const json& attempt : attempts) {
      if (!attempt.is_object()) continue;
      (source == "cloud-small" ? out.calls_small : out.calls_large) += 1;
      if (attempt.value("member_open", false)) ++out.calls_member_open;
      if (out.first_upstream.empty() && attempt.contains("upstream") && attempt["upstream"].is_string()) {
        out.first_upstream = attempt["upstream"].get<std::string>();
      }
    }
  }
}

namespace {

// "usage" of a reply or of a stream's usage chunk (streams ask for it: stream_options).
void read_usage(const json& doc, Outcome& out) {
  auto usage = doc.find("usage");
  if (usage == doc.end() || !usage->is_object()) return;
  if (auto it = usage->find("prompt_tokens"); it != usage->end() && it->is_number_integer()) {
    out.prompt_tokens = it->get<std::int64_t>();
  }
  if (auto it = usage->find("completion_tokens"); it != usage->end() && it->is_number_integer()) {
    out.completion_tokens = it->get<std::int64_t>();
  }
}

}  // namespace

void read_response(const std::string& body, bool stream, Outcome& out) {
  if (!stream) {
    json doc = parse_lenient(body);
    if (!doc.is_object()) return;
    if (auto it = doc.find("hengshi"); it != doc.end()) read_meta(*it, out);
    read_usage(doc, out);
    out.valid = doc.contains("choices") && doc["choices"].is_array() && !doc["choices"].empty();
    if (out.valid && doc["choices"][0].is_object()) {
      const json message = doc["choices"][0].value("message", json::object());
      if (message.is_object() && message.contains("content") && message["content"].is_string()) {
        out.content = message["content"].get<std::string>();
      }
    }
    if (out.valid && out.kind.empty()) out.kind = "model";  // the sim itself, called directly
    return;
  }
  // SSE: the metadata rides on the last chunk that carries "hengshi"; an error event or a
  // missing [DONE] makes the stream invalid.
  std::istringstream lines(body);
  std::string line;
  bool done = false;
  bool error_event = false;
  bool content = false;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data:", 0) != 0) continue;
    std::string payload = line.substr(5);
    if (!payload.empty() && payload.front() == ' ') payload.erase(0, 1);
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    json chunk = parse_lenient(payload);
    if (!chunk.is_object()) {
      error_event = true;
      continue;
    }
    if (chunk.contains("error")) error_event = true;
    if (chunk.contains("choices")) {
      content = true;
      const json& choices = chunk["choices"];
      if (choices.is_array() && !choices.empty() && choices[0].is_object()) {
        const json delta = choices[0].value("delta", json::object());
        if (delta.is_object() && delta.contains("content") && delta["content"].is_string()) {
          out.content += delta["content"].get<std::string>();
        }
      }
    }
    read_usage(chunk, out);
    if (auto it = chunk.find("hengshi"); it != chunk.end()) read_meta(*it, out);
  }
  out.valid = done && content && !error_event;
  if (out.valid && out.kind.empty()) out.kind = "model";
}

void run_load(const std::vector<Planned>& schedule, std::vector<Target*> targets, Clock::time_point start,
              std::int64_t deadline_ms, std::chrono::milliseconds give_up_after) {
  for (Target* target : targets) target->outcomes.assign(schedule.size(), Outcome{});
  asio::io_context io(1);
  asio::co_spawn(io, schedule_all(schedule, targets, start, deadline_ms, give_up_after), asio::detached);
  // A request coroutine that throws ends only itself (its outcome stays "no answer").
  while (true) {
    try {
      io.run();
      return;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "bench_chaos: a request failed: %s\n", error.what());
    }
  }
}

}  // namespace hengshi::bench
