// OpenAI request bodies -> GenRequest, with every field type- and range-checked.
#include <limits>

#include "server/gen_request.h"
#include "server/json_fields.h"

namespace tandem::server {
namespace {
using namespace fields;

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

void require_object(const json& body) {
  if (!body.is_object()) bad_field("", "the request body must be a JSON object");
}

std::string require_model(const json& body) {
  auto m = get_string(body, "model");
  if (!m || m->empty()) bad_field("model", "'model' is required");
  return *m;
}

// `content`: a string, null, or an array of {type:"text", text} parts.
std::string content_text(const json& msg, const std::string& where) {
  const json* c = find(msg, "content");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array())
    bad_field(where + ".content", "'{}.content' must be a string or an array of parts, got {}",
              where, type_name(*c));
  std::string text;
  for (auto& part : *c) {
    if (!part.is_object()) bad_field(where + ".content", "content parts must be objects");
    auto type = get_string(part, "type");
    if (type != "text")
      throw ApiError(
          400, "invalid_request_error", where + ".content",
          "only text content parts are supported (got " + quote(type.value_or("")) + ")");
    auto t = get_string(part, "text");
    if (!t) bad_field(where + ".content", "a text part needs 'text'");
    text += *t;
  }
  return text;
}

Message parse_message(const json& m, size_t i) {
  std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) bad_field(where, "'{}' must be an object, got {}", where, type_name(m));
  auto role = get_string(m, "role");
  if (!role) bad_field(where + ".role", "'{}.role' is required", where);
  Message out;
  out.role = *role == "developer" ? "system" : *role;
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    bad_field(where + ".role",
              "'{}.role' must be system, developer, user, assistant or tool, got {}", where,
              quote(*role));
  out.content = content_text(m, where);
  if (out.role == "assistant") {
    if (auto r = get_string(m, "reasoning_content"))
      out.reasoning = *r;
    else if (auto r2 = get_string(m, "reasoning"))
      out.reasoning = *r2;
    if (const json* calls = find(m, "tool_calls")) {
      if (!calls->is_array()) bad_field(where + ".tool_calls", "'tool_calls' must be an array");
      for (auto& c : *calls) {
        const json* f = c.is_object() ? find(c, "function") : nullptr;
        if (!f || !f->is_object())
          bad_field(where + ".tool_calls", "each tool call needs a 'function' object");
        ToolCall tc;
        auto name = get_string(*f, "name");
        if (!name || name->empty())
          bad_field(where + ".tool_calls", "each tool call needs 'function.name'");
        tc.name = *name;
        const json* args = find(*f, "arguments");
        if (!args)
          tc.arguments = "{}";
        else if (args->is_string())
          tc.arguments = args->get<std::string>();
        else if (args->is_object())
          tc.arguments = args->dump();
        else
          bad_field(where + ".tool_calls", "'function.arguments' must be a JSON string");
        out.tool_calls.push_back(std::move(tc));
      }
    }
  }
  if (out.role == "tool") {
    if (auto id = get_string(m, "tool_call_id")) out.tool_call_id = *id;
    if (auto n = get_string(m, "name")) out.name = *n;
  }
  return out;
}

void parse_tools(const json& body, GenRequest& r) {
  if (const json* tools = find(body, "tools")) {
    if (!tools->is_array()) bad_field("tools", "'tools' must be an array");
    for (auto& t : *tools) {
      if (!t.is_object()) bad_field("tools", "each tool must be an object");
      auto type = get_string(t, "type").value_or("function");
      if (type != "function")
        bad_field("tools", "tool type must be 'function', got {}", quote(type));
      const json* f = find(t, "function");
      if (!f || !f->is_object()) bad_field("tools", "each tool needs a 'function' object");
      auto name = get_string(*f, "name");
      if (!name || name->empty()) bad_field("tools", "each tool needs 'function.name'");
      if (const json* p = find(*f, "parameters"); p && !p->is_object())
        bad_field("tools", "'function.parameters' must be an object");
      json tool = {{"type", "function"}, {"function", *f}};
      r.tools.push_back(std::move(tool));
    }
  }
  const json* tc = find(body, "tool_choice");
  if (!tc) {
    r.tool_choice = ToolChoice::kAuto;
  } else if (tc->is_string()) {
    auto s = tc->get<std::string>();
    if (s == "auto")
      r.tool_choice = ToolChoice::kAuto;
    else if (s == "none")
      r.tool_choice = ToolChoice::kNone;
    else if (s == "required")
      r.tool_choice = ToolChoice::kRequired;
    else
      bad_field("tool_choice", "'tool_choice' must be none, auto, required or a function");
  } else if (tc->is_object()) {
    const json* f = find(*tc, "function");
    auto name = f && f->is_object() ? get_string(*f, "name") : std::nullopt;
    if (!name) bad_field("tool_choice", "'tool_choice' object needs function.name");
    r.tool_choice = ToolChoice::kNamed;
    r.tool_choice_name = *name;
    bool known = false;
    for (auto& t : r.tools) known |= t["function"]["name"] == *name;
    if (!known)
      bad_field("tool_choice", "tool_choice names {}, which is not in 'tools'", quote(*name));
  } else {
    bad_field("tool_choice", "'tool_choice' must be a string or an object");
  }
  if (r.tools.empty() && r.tool_choice == ToolChoice::kRequired)
    bad_field("tool_choice", "tool_choice 'required' needs 'tools'");
}

// Fields shared by chat and completions.
void parse_common(const json& body, GenRequest& r) {
  auto& s = r.sampling;
  s.temperature = get_number(body, "temperature", 0, 2);
  s.top_p = get_number(body, "top_p", 0, 1);
  if (auto k = get_int(body, "top_k", -1, kMaxInt)) s.top_k = int(*k < 0 ? 0 : *k);
  s.min_p = get_number(body, "min_p", 0, 1);
  s.presence_penalty = get_number(body, "presence_penalty", -2, 2);
  s.frequency_penalty = get_number(body, "frequency_penalty", -2, 2);
  s.repetition_penalty = get_number(body, "repetition_penalty", 0.01, 10);
  s.seed = get_seed(body, "seed");
  auto mt = get_int(body, "max_tokens", 1, kMaxInt);
  auto mct = get_int(body, "max_completion_tokens", 1, kMaxInt);
  if (mct)
    r.max_tokens = int(*mct);
  else if (mt)
    r.max_tokens = int(*mt);
  r.n = int(get_int(body, "n", 1, 128).value_or(1));
  r.stop = get_stop(body, "stop", 4);
  r.stream = get_bool(body, "stream").value_or(false);
  if (const json* so = find(body, "stream_options")) {
    if (!so->is_object()) bad_field("stream_options", "'stream_options' must be an object");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  if (const json* rf = find(body, "response_format")) {
    if (!rf->is_object()) bad_field("response_format", "'response_format' must be an object");
    auto type = get_string(*rf, "type").value_or("");
    if (type != "text")
      throw ApiError(400, "invalid_request_error", "response_format",
                     "response_format " + quote(type) +
                         " is not supported: tandem has no constrained decoding yet");
  }
  if (const json* lb = find(body, "logit_bias"); lb && !(lb->is_object() && lb->empty()))
    throw ApiError(400, "invalid_request_error", "logit_bias", "logit_bias is not supported");
  if (auto u = find(body, "user"); u && !u->is_string())
    bad_field("user", "'user' must be a string");
  if (auto b = get_int(body, "thinking_budget", 0, kMaxInt)) r.thinking_budget = int(*b);
}

}  // namespace

GenRequest parse_openai_chat(const json& body) {
  require_object(body);
  GenRequest r;
  r.api = Api::kOpenAIChat;
  r.model = require_model(body);
  const json* msgs = find(body, "messages");
  if (!msgs || !msgs->is_array()) bad_field("messages", "'messages' must be an array");
  if (msgs->empty()) bad_field("messages", "'messages' must not be empty");
  for (size_t i = 0; i < msgs->size(); ++i) r.messages.push_back(parse_message((*msgs)[i], i));
  parse_tools(body, r);
  parse_common(body, r);
  r.logprobs = get_bool(body, "logprobs").value_or(false);
  if (auto t = get_int(body, "top_logprobs", 0, 20)) {
    if (!r.logprobs) bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.top_logprobs = int(*t);
  }
  if (const json* kw = find(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad_field("chat_template_kwargs", "must be an object");
    r.think = get_bool(*kw, "enable_thinking");
    if (auto b = get_int(*kw, "thinking_budget", 0, kMaxInt)) r.thinking_budget = int(*b);
  }
  return r;
}

GenRequest parse_openai_completion(const json& body) {
  require_object(body);
  GenRequest r;
  r.api = Api::kOpenAICompletion;
  r.model = require_model(body);
  const json* p = find(body, "prompt");
  if (!p) bad_field("prompt", "'prompt' is required");
  auto bad_prompt = [] {
    bad_field("prompt",
              "'prompt' must be a string, an array of strings, an array of token ids or an "
              "array of arrays of token ids");
  };
  auto ids_of = [&](const json& a) {
    std::vector<int32_t> ids;
    for (auto& t : a) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > kMaxInt)
        bad_field("prompt", "token ids must be non-negative integers");
      ids.push_back(int32_t(t.get<int64_t>()));
    }
    if (ids.empty()) bad_field("prompt", "'prompt' must not be empty");
    return ids;
  };
  if (p->is_string()) {
    r.prompts.push_back(p->get<std::string>());
  } else if (p->is_array() && !p->empty()) {
    const json& first = (*p)[0];
    if (first.is_string()) {
      for (auto& s : *p) {
        if (!s.is_string()) bad_prompt();
        r.prompts.push_back(s.get<std::string>());
      }
    } else if (first.is_number()) {
      r.prompt_ids.push_back(ids_of(*p));
    } else if (first.is_array()) {
      for (auto& a : *p) {
        if (!a.is_array()) bad_prompt();
        r.prompt_ids.push_back(ids_of(a));
      }
    } else {
      bad_prompt();
    }
  } else {
    bad_prompt();
  }
  for (auto& s : r.prompts)
    if (s.empty()) bad_field("prompt", "'prompt' must not be empty");
  if (r.prompts.size() + r.prompt_ids.size() > 64)
    bad_field("prompt", "at most 64 prompts per request");
  parse_common(body, r);
  r.echo = get_bool(body, "echo").value_or(false);
  if (auto lp = get_int(body, "logprobs", 0, 20)) {
    r.logprobs = true;
    r.top_logprobs = int(*lp);
  }
  if (auto sfx = get_string(body, "suffix"); sfx && !sfx->empty())
    throw ApiError(400, "invalid_request_error", "suffix", "'suffix' is not supported");
  if (auto bo = get_int(body, "best_of", 1, 128); bo && *bo != r.n)
    throw ApiError(400, "invalid_request_error", "best_of",
                   "'best_of' other than 'n' is not supported");
  if (r.n * (r.prompts.size() + r.prompt_ids.size()) > 128)
    bad_field("n", "n times the number of prompts must be at most 128");
  return r;
}

}  // namespace tandem::server
