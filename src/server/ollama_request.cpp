// Ollama request bodies -> GenRequest. Ollama's own validation is loose; ours reports the
// field by name with a 400 in Ollama's error shape (the router picks the shape).
#include <limits>

#include "server/gen_request.h"
#include "server/json_fields.h"
#include "tokenizer/py_json.h"

namespace tandem::server {
namespace {
using namespace fields;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

void refuse(const char* field, const std::string& why) {
  throw ApiError(400, "invalid_request_error", field, why);
}

void common_head(const json& body, GenRequest& r) {
  if (!body.is_object()) bad_field("", "the request body must be a JSON object");
  auto m = get_string(body, "model");
  if (!m || m->empty()) bad_field("model", "model is required");
  r.model = *m;
  r.stream = get_bool(body, "stream").value_or(true);
  if (const json* f = find(body, "format"); f && !(f->is_string() && f->get<std::string>().empty()))
    refuse("format",
           "'format' is not supported: tandem has no constrained decoding yet (leave it out)");
  if (const json* imgs = find(body, "images"); imgs && !(imgs->is_array() && imgs->empty()))
    refuse("images", "'images' is not supported: Qwen3 text models take no images");
  if (const json* ka = find(body, "keep_alive")) {
    if (!ka->is_number() && !ka->is_string())
      bad_field("keep_alive", "'keep_alive' must be a number of seconds or a duration string");
    r.unload =
        (ka->is_number() && ka->get<double>() == 0) ||
        (ka->is_string() && (ka->get<std::string>() == "0" || ka->get<std::string>() == "0s"));
  }
  if (const json* t = find(body, "think")) {
    if (t->is_boolean()) {
      r.think = t->get<bool>();
    } else if (t->is_string()) {
      auto s = t->get<std::string>();
      if (s != "low" && s != "medium" && s != "high" && s != "max")
        bad_field("think", "'think' must be true, false, low, medium, high or max, got {}",
                  quote(s));
      r.think = true;
    } else {
      bad_field("think", "'think' must be a boolean or a level string");
    }
  }
  if (auto b = get_int(body, "thinking_budget", 0, kMaxInt)) r.thinking_budget = int(*b);
  if (auto lp = get_bool(body, "logprobs")) r.logprobs = *lp;
  if (auto t = get_int(body, "top_logprobs", 0, 20)) r.top_logprobs = int(*t);

  const json* o = find(body, "options");
  if (!o) return;
  if (!o->is_object()) bad_field("options", "'options' must be an object");
  auto& s = r.sampling;
  if (auto v = get_int(*o, "num_ctx", 1, kMaxInt)) r.num_ctx = int(*v);
  if (auto v = get_int(*o, "num_predict", -2, kMaxInt)) {
    if (*v == 0) bad_field("num_predict", "'num_predict' must be -2, -1 or at least 1");
    if (*v > 0) r.max_tokens = int(*v);
  }
  s.temperature = get_number(*o, "temperature", 0, 100);
  if (auto v = get_int(*o, "top_k", 0, kMaxInt)) s.top_k = int(*v);
  s.top_p = get_number(*o, "top_p", 0, 1);
  s.min_p = get_number(*o, "min_p", 0, 1);
  get_number(*o, "typical_p", 0, 1);  // accepted; 1.0 (off) is the only behaviour
  if (auto v = get_number(*o, "repeat_penalty", 0, 10)) s.repetition_penalty = *v > 0 ? *v : 1.0;
  if (auto v = get_int(*o, "repeat_last_n", -1, kMaxInt)) s.penalty_last_n = int(*v);
  s.presence_penalty = get_number(*o, "presence_penalty", -2, 2);
  s.frequency_penalty = get_number(*o, "frequency_penalty", -2, 2);
  if (auto v = get_seed(*o, "seed"); v && int64_t(*v) != -1) s.seed = v;
  r.stop = get_stop(*o, "stop", 16);
  r.ignore_eos = get_bool(*o, "ignore_eos").value_or(false);  // tandem extension (benchmarks)
  if (auto b = get_int(*o, "thinking_budget", 0, kMaxInt)) r.thinking_budget = int(*b);
}

Message parse_message(const json& m, size_t i) {
  std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) bad_field(where, "'{}' must be an object", where);
  auto role = get_string(m, "role");
  if (!role) bad_field(where + ".role", "'{}.role' is required", where);
  Message out;
  out.role = *role;
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    bad_field(where + ".role", "'{}.role' must be system, user, assistant or tool, got {}", where,
              quote(*role));
  out.content = get_string(m, "content").value_or("");
  out.reasoning = get_string(m, "thinking").value_or("");
  if (const json* imgs = find(m, "images"); imgs && !(imgs->is_array() && imgs->empty()))
    refuse("images", "'images' is not supported: Qwen3 text models take no images");
  if (const json* calls = find(m, "tool_calls")) {
    if (!calls->is_array()) bad_field(where + ".tool_calls", "'tool_calls' must be an array");
    for (auto& c : *calls) {
      const json* f = c.is_object() ? find(c, "function") : nullptr;
      if (!f || !f->is_object())
        bad_field(where + ".tool_calls", "each tool call needs a 'function' object");
      auto name = get_string(*f, "name");
      if (!name || name->empty())
        bad_field(where + ".tool_calls", "each tool call needs 'function.name'");
      ToolCall tc{*name, "{}"};
      if (const json* a = find(*f, "arguments")) {
        if (a->is_object())
          tc.arguments = a->dump();
        else if (a->is_string())
          tc.arguments = a->get<std::string>();
        else
          bad_field(where + ".tool_calls", "'function.arguments' must be an object");
      }
      out.tool_calls.push_back(std::move(tc));
    }
  }
  if (auto n = get_string(m, "tool_name")) out.name = *n;
  return out;
}

}  // namespace

GenRequest parse_ollama_chat(const json& body) {
  GenRequest r;
  r.api = Api::kOllamaChat;
  common_head(body, r);
  const json* msgs = find(body, "messages");
  if (msgs && !msgs->is_array()) bad_field("messages", "'messages' must be an array");
  if (msgs)
    for (size_t i = 0; i < msgs->size(); ++i) r.messages.push_back(parse_message((*msgs)[i], i));
  r.load_only = r.messages.empty();
  if (const json* tools = find(body, "tools")) {
    if (!tools->is_array()) bad_field("tools", "'tools' must be an array");
    for (auto& t : *tools) {
      const json* f = t.is_object() ? find(t, "function") : nullptr;
      if (!f || !f->is_object()) bad_field("tools", "each tool needs a 'function' object");
      auto name = get_string(*f, "name");
      if (!name || name->empty()) bad_field("tools", "each tool needs 'function.name'");
      r.tools.push_back(json{{"type", "function"}, {"function", *f}});
    }
  }
  return r;
}

GenRequest parse_ollama_generate(const json& body) {
  GenRequest r;
  r.api = Api::kOllamaGenerate;
  common_head(body, r);
  auto prompt = get_string(body, "prompt").value_or("");
  if (auto sfx = get_string(body, "suffix"); sfx && !sfx->empty())
    refuse("suffix", "'suffix' is not supported (no fill-in-the-middle yet)");
  if (auto t = get_string(body, "template"); t && !t->empty())
    refuse("template",
           "'template' is not supported: tandem renders the model's own chat template; send "
           "a pre-formatted prompt with \"raw\": true instead");
  if (const json* c = find(body, "context"); c && !(c->is_array() && c->empty()))
    refuse("context", "'context' is not supported; use /api/chat for conversations");
  r.system = get_string(body, "system").value_or("");
  r.raw = get_bool(body, "raw").value_or(false);
  r.load_only = prompt.empty();
  if (!prompt.empty()) r.prompts.push_back(std::move(prompt));
  return r;
}

}  // namespace tandem::server
