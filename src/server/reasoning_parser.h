#pragma once
// Splits Qwen3 output into reasoning and answer: `<think>\n...\n</think>\n\nanswer`.
// Streaming: text arrives in pieces; partial tags and trailing whitespace of the reasoning
// are held back, so the concatenated deltas equal the non-streamed split exactly.
// If the prompt already opened the block (a template that appends `<think>\n`, or a
// continuation after a forced `</think>`), start with `in_think = true`.
#include <string>
#include <string_view>

namespace tandem::server {

struct SplitText {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
 public:
  explicit ReasoningParser(bool in_think = false);
  SplitText push(std::string_view piece);
  SplitText finish();  // end of output: release held text (an unclosed block stays reasoning)
  bool in_reasoning() const { return state_ != State::kContent; }
  bool closed() const { return closed_; }                          // `</think>` was seen
  bool in_think_block() const { return state_ == State::kThink; }  // inside <think>...

 private:
  enum class State { kStart, kThink, kContent };
  void run(SplitText& out, bool final);
  State state_;
  std::string buf_;
  bool strip_lead_ = false;  // drop leading whitespace of the section just entered
  bool closed_ = false;
};

}  // namespace tandem::server
