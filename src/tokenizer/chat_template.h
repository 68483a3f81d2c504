#pragma once
// Native renderer of the Qwen3 chat template (the `chat_template` of Qwen3's
// tokenizer_config.json), byte-exact with transformers' apply_chat_template(tokenize=False):
//  - an optional first system message (merged into the tools block when tools are given);
//  - `<|im_start|>{role}\n{content}<|im_end|>\n` turns;
//  - assistant reasoning (`reasoning_content`, or the text before `</think>` in content) is
//    kept only on assistant turns after the last real user query, and dropped before it;
//  - assistant `tool_calls` as `<tool_call>` blocks, runs of `tool` messages as one user
//    turn of `<tool_response>` items;
//  - the generation prompt, with the empty think block when enable_thinking is false.
// Unlike the Jinja template it also accepts `content: null` (as empty; OpenAI clients send
// it beside tool_calls) and content given as a list of text parts (joined with "\n").
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::tok {

// sha256 of the chat_template string this renderer reproduces (Qwen3's, as pinned).
inline constexpr const char* kQwen3ChatTemplateSha256 =
    "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5";

struct ChatOptions {
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // nullopt = template default (thinking on)
};

// `messages` and `tools` are OpenAI-shaped JSON (ordered_json keeps key order for tojson).
// Throws tandem::Error(kInvalidArgument) on malformed messages (unknown role, bad types).
std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                        const ChatOptions& opt);

}  // namespace tandem::tok
