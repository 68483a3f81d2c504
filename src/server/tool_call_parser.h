#pragma once
// Hermes-style tool calls as Qwen3 writes them: `<tool_call>\n{"name": N, "arguments": {...}}
// \n</tool_call>`, several per turn. Streaming: text before a call is content; a call is
// held until its closing tag and then returned whole (name and arguments as a JSON string).
// A call whose JSON is malformed (or unterminated at the end) comes back as plain content,
// never as an error.
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialised
};

struct ToolDelta {
  std::string content;
  std::vector<ToolCall> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
 public:
  ToolDelta push(std::string_view piece);
  ToolDelta finish();
  int num_calls() const { return calls_; }

  // Parses the body between the tags; false when it is not a call.
  static bool parse_call(std::string_view body, ToolCall& out);

 private:
  void run(ToolDelta& out, bool final);
  void emit_text(ToolDelta& out, std::string_view s);
  std::string buf_;
  std::string pending_ws_;  // whitespace after a call, sent only if more text follows
  bool in_call_ = false;
  int calls_ = 0;
};

}  // namespace tandem::server
