#pragma once
// Whether a Qwen3 request thinks. Precedence, highest first:
//   1. the request's own switch: `chat_template_kwargs.enable_thinking` (OpenAI), `think`
//      (Ollama);
//   2. the latest `/think` or `/no_think` in a system or user message (Qwen3's soft switch);
//   3. the server default, `--thinking on|off|auto`. `auto` thinks when the last user message
//      looks like work: at least kAutoLongWords words, a code block, arithmetic, or a
//      reasoning cue ("why", "prove", "step by step", "calculate", ...). Short chat does not.
#include <string>
#include <string_view>

#include "server/gen_request.h"

namespace tandem::server {

enum class ThinkingDefault { kOn, kOff, kAuto };

ThinkingDefault parse_thinking_default(const std::string& s);  // throws tandem::Error
const char* to_string(ThinkingDefault d);

inline constexpr int kAutoLongWords = 60;

bool auto_wants_thinking(std::string_view user_text);
// -1: no soft switch in the messages, 0: /no_think, 1: /think.
int soft_switch(const GenRequest& r);
bool resolve_thinking(const GenRequest& r, ThinkingDefault def);

}  // namespace tandem::server
