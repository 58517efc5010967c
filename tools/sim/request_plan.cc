#include "sim/request_plan.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "sim/sim_random.h"

namespace hengshi::sim {
namespace {

constexpr std::string_view kMarkerOpen = "[[sim:";
constexpr std::string_view kMarkerClose = "]]";

std::optional<Outcome> outcome_marker(std::string_view name) {
  if (name == "hang") return Outcome::kHang;
  if (name == "error") return Outcome::kError;
  if (name == "429") return Outcome::kRateLimit;
  if (name == "garbage") return Outcome::kGarbage;
  if (name == "disconnect") return Outcome::kDisconnect;
  if (name == "ok") return Outcome::kOk;
  return std::nullopt;
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kError:
      return "error";
    case Outcome::kRateLimit:
      return "rate_limit";
    case Outcome::kHang:
      return "hang";
    case Outcome::kDisconnect:
      return "disconnect";
    case Outcome::kGarbage:
      return "garbage";
  }
  return "ok";
}

Markers parse_markers(std::string_view text) {
  Markers markers;
  std::size_t pos = 0;
  while ((pos = text.find(kMarkerOpen, pos)) != std::string_view::npos) {
    std::size_t start = pos + kMarkerOpen.size();
    std::size_t end = text.find(kMarkerClose, start);
    if (end == std::string_view::npos) break;
    std::string_view body = text.substr(start, end - start);
    pos = end + kMarkerClose.size();
    if (auto outcome = outcome_marker(body)) {
      markers.forced_outcome = outcome;
    } else if (body.substr(0, 6) == "reply=") {
      markers.reply = std::string(body.substr(6));
    } else if (body.substr(0, 5) == "slow=") {
      std::string_view digits = body.substr(5);
      std::int64_t ms = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
      if (ec == std::errc() && ptr == digits.data() + digits.size() && ms >= 0) {
        markers.slow_ms = ms;
      }
    }
  }
  return markers;
}

RequestPlan plan_request(const Behaviour& behaviour, std::uint64_t seed,
                         std::uint64_t request_index, bool stream, const Markers& markers) {
  SimRandom random(seed, request_index);
  // A fixed order of draws, all made every time, so one knob never shifts another's draw.
  double outcome_draw = random.uniform01();
  double latency_ms = LatencyModel(behaviour.latency_ms).sample_ms(random);
  double ttft_ms = LatencyModel(behaviour.ttft_ms).sample_ms(random);
  std::int64_t tokens =
      random.uniform_int(behaviour.output_tokens.min, behaviour.output_tokens.max);

  RequestPlan plan;
  // Disjoint outcomes laid end to end on [0, 1): error | 429 | hang | disconnect | garbage | ok.
  const std::pair<double, Outcome> shares[] = {
      {behaviour.error_rate, Outcome::kError},
      {behaviour.rate_limit_rate, Outcome::kRateLimit},
      {behaviour.hang_rate, Outcome::kHang},
      {behaviour.disconnect_rate, Outcome::kDisconnect},
      {behaviour.garbage_rate, Outcome::kGarbage},
  };
  double edge = 0;
  for (const auto& [share, outcome] : shares) {
    edge += share;
    if (outcome_draw < edge) {
      plan.outcome = outcome;
      break;
    }
  }
  if (markers.forced_outcome) plan.outcome = *markers.forced_outcome;

  bool answers_at_once = plan.outcome == Outcome::kError || plan.outcome == Outcome::kRateLimit;
  double drawn_delay_ms = answers_at_once ? 0 : (stream ? ttft_ms : latency_ms);
  plan.delay_ms = markers.slow_ms ? *markers.slow_ms : std::llround(drawn_delay_ms);
  plan.token_interval_us =
      behaviour.tokens_per_s > 0 ? std::llround(1e6 / behaviour.tokens_per_s) : 0;
  plan.output_tokens = tokens;
  plan.disconnect_after_chunks = behaviour.disconnect_after_chunks;
  plan.retry_after_s = behaviour.retry_after_s;
  plan.reply = markers.reply;
  return plan;
}

}  // namespace hengshi::sim
