#pragma once
// Hermes-style tool calls as Qwen3 writes them: `<tool_call>\n{"name": N, "arguments": {...}}
// \n</tool_call>`, several per turn. Streaming: text before a call is content. A call whose
// body begins the way Qwen3 writes it, `{"name": "N", "arguments": {`, is a call from that
// point on: its name comes at once and its arguments as they are written (the model's own
// text of the arguments object, ending at its closing brace), so clients can show them
// growing. Any other body is held to its closing tag and parsed whole (arguments given as a
// string are taken as they are); if it is not a call (malformed JSON, no name), it comes
// back as plain content, never as an error. Streamed and whole parses give the same result.
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, serialised
};

// The parser's output in order: text, and each call as begin (its name), argument fragments
// (their concatenation is the call's arguments) and end.
struct ToolPiece {
  enum class Kind { kText, kCallBegin, kCallArgs, kCallEnd };
  Kind kind = Kind::kText;
  std::string text;  // kText: content; kCallBegin: the name; kCallArgs: a fragment
};

struct ToolDelta {
  std::string content;            // the kText pieces, joined
  std::vector<ToolCall> calls;    // the calls that ended in this delta, whole
  std::vector<ToolPiece> pieces;  // everything above, in order
  bool empty() const { return pieces.empty(); }
};

class ToolCallParser {
 public:
  ToolDelta push(std::string_view piece);
  ToolDelta finish();
  int num_calls() const { return calls_; }

  // Parses the body between the tags; false when it is not a call.
  static bool parse_call(std::string_view body, ToolCall& out);

 private:
  enum class State { kText, kHeader, kArgs, kTail, kWhole };
  void run(ToolDelta& out, bool final);
  void emit_text(ToolDelta& out, std::string_view s);
  void begin_call(ToolDelta& out, std::string name);
  void args(ToolDelta& out, std::string_view s);
  void end_call(ToolDelta& out);
  // The body so far is Qwen3's call start through the arguments' `{`: 1 (its length in
  // `consumed`, the name in `name`), 0 when it cannot become one, -1 when undecided.
  static int match_header(std::string_view body, size_t& consumed, std::string& name);

  State state_ = State::kText;
  std::string buf_;
  std::string pending_ws_;  // whitespace after a call, sent only if more text follows
  ToolCall cur_;            // the call being streamed
  int depth_ = 0;           // brackets open in the arguments
  bool in_string_ = false, escape_ = false;
  int calls_ = 0;
};

}  // namespace tandem::server
