// CommitGate: the stream's commit point (chain.commit). Before it, a stream's pieces are held
// back, so a failing attempt can be discarded and replaced by the next level without the client
// seeing anything; at it, the held pieces go out and the answer's source is fixed — after it the
// stream finishes from the same source or ends with an error event, never spliced from another
// model mid-answer. The point is N content pieces or the end of the first full sentence,
// whichever comes first (tokens 0 = commit at once). Pure logic; not thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/chain_config.h"

namespace hengshi::chain {

class CommitGate {
 public:
  explicit CommitGate(const CommitConfig& config) : config_(config) {}
  // Feeds one piece of answer text; true once the commit point is reached (stays true).
  bool add_text(std::string_view text);
  bool reached() const { return reached_; }

 private:
  CommitConfig config_;
  int pieces_ = 0;
  std::string text_;  // what is held, for the sentence check
  bool reached_ = false;
};

// True when `text` contains the end of a sentence: 。！？ or a newline anywhere, or . ! ?
// followed by whitespace (so "3.5" and "e.g" do not end one).
bool ends_a_sentence(std::string_view text);

// The answer text of one upstream chat.completion.chunk (choices[0].delta.content), "" when
// there is none or the JSON does not parse.
std::string chunk_content(std::string_view chunk_json);

// What one chunk adds to the answer: its text, whether it carries tool calls, its finish reason.
struct ChunkDelta {
  std::string content;
  bool tool_calls = false;
  std::string finish_reason;  // "" until the last chunk
};
ChunkDelta chunk_delta(std::string_view chunk_json);

}  // namespace hengshi::chain
