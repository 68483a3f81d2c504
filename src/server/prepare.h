#pragma once
// GenRequest -> what the engine runs: the rendered and tokenized prompt(s), sampling
// parameters with the model's defaults filled in, the token budget, and how the output is
// to be read back (reasoning split, tool calls). Context-length checks happen here.
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/context.h"
#include "server/gen_request.h"

namespace tandem::server {

struct Prepared {
  std::vector<std::vector<engine::TokenId>> prompts;  // one per distinct prompt
  std::vector<std::string> prompt_texts;              // the same as text (echo, logs)
  // Text the prompt already holds as the start of the answer (a forced tool call for
  // tool_choice required/named); the output parsers see it before the first token.
  std::string prefill;
  bool split_reasoning = false;  // run the <think> parser
  bool in_think = false;         // the prompt opened <think> already
  bool thinking = false;         // the template let the model think
  bool parse_tools = false;
  int max_tokens = 0;        // per sample
  int thinking_budget = -1;  // tokens of reasoning before </think> is forced; -1 none
  engine::SamplingParams sampling;
  std::vector<engine::TokenId> stop_ids;
};

Prepared prepare(const GenRequest& r, const ServerContext& ctx);

// The chat prompt for `messages` (Qwen3's template, REFERENCE.md 6), ending with the
// assistant generation prompt.
std::string render_chat_prompt(const std::vector<Message>& messages, const json& tools,
                               bool enable_thinking);

}  // namespace tandem::server
