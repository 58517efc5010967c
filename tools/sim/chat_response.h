// Chat response bodies: the OpenAI wire format the simulator answers with, built from a
// RequestPlan with no I/O, so the server only decides when bytes go out.
//   non-stream: a chat.completion object plus "sim": {"name", "model", "request_index"}
//   stream:     SSE events — role, one per content token, the finish chunk, the usage chunk
//               (choices: []) when asked for, then "data: [DONE]"; each chunk carries "sim" too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/api_error.h"
#include "core/chat_request.h"
#include "sim/request_plan.h"

namespace hengshi::sim {

// Who answered which request; echoed in every body so a test can tell which upstream played.
struct ReplyIdentity {
  std::string_view sim_name;
  std::string_view model;           // the requested model, echoed as the response's model
  std::uint64_t request_index = 0;  // arrival index; the id is "chatcmpl-sim-<index>"
  std::int64_t created_s = 0;       // unix seconds
};

struct Completion {
  std::vector<std::string> words;  // content tokens; joined with spaces they are the content
  std::int64_t prompt_tokens = 0;
  std::string finish_reason;  // "stop", or "length" when max_tokens cut the answer
};

// The planned answer to `request`, cut to its max_tokens.
Completion make_completion(std::string_view sim_name, const ChatRequest& request,
                           const RequestPlan& plan);

// The chat.completion JSON body.
std::string completion_body(const ReplyIdentity& identity, const Completion& completion);

struct SseEvent {
  std::string text;    // "data: ...\n\n"
  bool paced = false;  // a content token after the first: sent token_interval after the previous
};

// Every event of a stream, in order; `garbage` inserts a non-JSON event after the role chunk.
std::vector<SseEvent> stream_events(const ReplyIdentity& identity, const Completion& completion,
                                    bool include_usage, bool garbage);

// A body that is not JSON, for the garbage outcome.
std::string_view garbage_body();

// The injected faults, as OpenAI error objects.
ApiError injected_server_error(std::string_view sim_name);
ApiError injected_rate_limit(std::string_view sim_name, std::int64_t retry_after_s);

}  // namespace hengshi::sim
