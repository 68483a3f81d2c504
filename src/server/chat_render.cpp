// Messages -> the Qwen3 chat prompt, through the tokenizer's native template renderer.
#include "server/prepare.h"
#include "tokenizer/chat_template.h"

namespace tandem::server {

std::string render_chat_prompt(const std::vector<Message>& messages, const json& tools,
                               bool enable_thinking) {
  json msgs = json::array();
  for (auto& m : messages) {
    json j = {{"role", m.role}, {"content", m.content}};
    if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
    if (!m.tool_calls.empty()) {
      json calls = json::array();
      for (auto& c : m.tool_calls) {
        // Verbatim, as the template writes string arguments (OpenAI sends strings; the Ollama
        // parser stored its objects already in tojson's layout).
        calls.push_back(
            {{"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    msgs.push_back(std::move(j));
  }
  tok::ChatOptions opt;
  opt.add_generation_prompt = true;
  opt.enable_thinking = enable_thinking;
  return tok::render_chat(msgs, tools, opt);
}

}  // namespace tandem::server
